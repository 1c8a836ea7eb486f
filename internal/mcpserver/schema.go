package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// compiledSchema is a JSON Schema resolved once at registration.
type compiledSchema struct {
	raw      json.RawMessage
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// compileObjectSchema parses and resolves a JSON Schema 2020-12 document
// whose root must be {"type":"object", ...}. When closed is set the root
// must also say "additionalProperties": false: write tools accept nothing
// they do not declare.
func compileObjectSchema(raw json.RawMessage, closed bool) (*compiledSchema, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("schema is empty")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parsing schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf(`schema root must have "type": "object" (got %q)`, s.Type)
	}
	if closed && !isFalseSchema(s.AdditionalProperties) {
		return nil, fmt.Errorf(`schema root must have "additionalProperties": false`)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolving schema: %w", err)
	}
	return &compiledSchema{raw: raw, schema: &s, resolved: resolved}, nil
}

// isFalseSchema reports whether s is the boolean schema false (jsonschema-go
// stores it as {"not": {}} and marshals that back to false).
func isFalseSchema(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	data, err := json.Marshal(s)
	return err == nil && string(data) == "false"
}

// validateJSON decodes data and validates it. It returns the decoded value
// for callers that need to explain a failure.
func (c *compiledSchema) validateJSON(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	if err := c.resolved.Validate(v); err != nil {
		return v, err
	}
	return v, nil
}
