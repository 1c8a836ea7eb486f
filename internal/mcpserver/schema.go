package mcpserver

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// compiledSchema is a JSON Schema resolved once at registration.
type compiledSchema struct {
	raw      json.RawMessage
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	// problems words a refusal of arguments (input schemas only).
	problems *problemNode
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

// checkClosedObjectRoot checks, without resolving it, that raw is a JSON
// object whose "type" is "object" and whose "additionalProperties" is
// false: the shape compileObjectSchema requires of an input schema, at a
// fraction of its cost.
func checkClosedObjectRoot(raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("schema is empty")
	}
	var root struct {
		Type                 json.RawMessage  `json:"type"`
		AdditionalProperties *json.RawMessage `json:"additionalProperties"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return fmt.Errorf("parsing schema: %w", err)
	}
	if err := checkObjectType(root.Type); err != nil {
		return err
	}
	if root.AdditionalProperties == nil || !isFalseSchemaJSON(*root.AdditionalProperties) {
		return fmt.Errorf(`schema root must have "additionalProperties": false`)
	}
	return nil
}

// checkObjectType requires a schema root's "type" (raw JSON, nil when
// absent) to be "object".
func checkObjectType(typ json.RawMessage) error {
	var v any
	if len(typ) > 0 {
		if err := json.Unmarshal(typ, &v); err != nil {
			return fmt.Errorf("parsing schema type: %w", err)
		}
	}
	if s, _ := v.(string); s != "object" {
		got := ""
		if v != nil {
			got = fmt.Sprint(v)
		}
		return fmt.Errorf(`schema root must have "type": "object" (got %q)`, got)
	}
	return nil
}

// isFalseSchemaJSON reports whether data is the boolean schema false, in
// either spelling jsonschema-go accepts (false, or {"not": {}}).
func isFalseSchemaJSON(data json.RawMessage) bool {
	if string(bytes.TrimSpace(data)) == "false" {
		return true
	}
	var s jsonschema.Schema
	return json.Unmarshal(data, &s) == nil && isFalseSchema(&s)
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

// advertisedOutputSchema is the outputSchema clients see: the tool's own
// result shape or the error envelope. The MCP specification requires every
// structured result to conform to the outputSchema, errors included, and
// validating clients (the Inspector, the TypeScript SDK) refuse one that
// does not. anyOf, not oneOf: a tool's own schema may be open enough to
// admit an error body too, which is still a conforming result.
//
// The tool's schema is nested, so it must not point at its own root
// ("$ref", "$defs", "$id" would resolve against the union instead).
func advertisedOutputSchema(own, envelope json.RawMessage) (json.RawMessage, error) {
	if len(own) == 0 {
		return nil, fmt.Errorf("schema is empty")
	}
	// One parse of the root: at start every byte of every schema is read by
	// the SDK twice more, so this reads it once and writes the union around
	// it instead of encoding it again.
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(own, &doc); err != nil {
		return nil, fmt.Errorf("parsing schema: %w", err)
	}
	if err := checkObjectType(doc["type"]); err != nil {
		return nil, err
	}
	for _, k := range []string{"$defs", "definitions", "$id", "$anchor"} {
		if _, ok := doc[k]; ok {
			return nil, fmt.Errorf("schema root must not use %q: the advertised schema nests it", k)
		}
	}
	if bytes.Contains(own, []byte(`"$ref"`)) || bytes.Contains(own, []byte(`"$dynamicRef"`)) {
		return nil, fmt.Errorf(`schema must not use "$ref": the advertised schema nests it`)
	}
	// The dialect belongs to the union's root, where a validator reads it.
	inner := []byte(own)
	dialect, hasDialect := doc["$schema"]
	if hasDialect {
		delete(doc, "$schema")
		var err error
		if inner, err = json.Marshal(doc); err != nil {
			return nil, fmt.Errorf("encoding schema: %w", err)
		}
	}
	out := make([]byte, 0, len(inner)+len(envelope)+len(dialect)+48)
	if hasDialect {
		out = append(append(append(out, `{"$schema":`...), dialect...), ',')
	} else {
		out = append(out, '{')
	}
	out = append(append(out, `"anyOf":[`...), inner...)
	out = append(append(append(out, ','), envelope...), `],"type":"object"}`...)
	return out, nil
}

// The error envelope is generated from ErrorBody ahead of time and
// committed (schemas/error_envelope.json; TestCommittedSchemasAreGeneratedFromTheTypes
// keeps it equal to errorEnvelopeSchemaFromType): generating it at start
// cost a cold start reflection and a marshal of the schema tree. The one
// part that is configuration, the codes, stands in it as a placeholder.
//
//go:embed schemas/error_envelope.json
var committedSchemas embed.FS

const errorEnvelopeFile = "schemas/error_envelope.json"

// errorCodesPlaceholder is the one code of the committed envelope: where
// the server's codes (Config.ErrorCodes) go.
const errorCodesPlaceholder = "ERROR_CODES"

// errorEnvelopeTemplate is the committed envelope, compacted: the bytes
// errorEnvelopeSchemaFromType generates for the codes [placeholder].
func errorEnvelopeTemplate() ([]byte, error) {
	indented, err := committedSchemas.ReadFile(errorEnvelopeFile)
	if err != nil {
		return nil, fmt.Errorf("error envelope schema: %w", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, indented); err != nil {
		return nil, fmt.Errorf("error envelope schema %s: %w", errorEnvelopeFile, err)
	}
	return compact.Bytes(), nil
}

// errorEnvelopeSchema is the JSON Schema of ErrorBody, the structuredContent
// of every BusinessError result: closed objects, code one of codes (at
// least one), next_action omitted when there is none (never null). Every
// tool's advertised outputSchema admits it (advertisedOutputSchema). It is
// the committed envelope with codes in place of the placeholder: byte for
// byte what errorEnvelopeSchemaFromType(codes) generates.
func errorEnvelopeSchema(codes []string) (json.RawMessage, error) {
	if len(codes) == 0 {
		return nil, fmt.Errorf("error envelope schema: no error codes")
	}
	template, err := errorEnvelopeTemplate()
	if err != nil {
		return nil, err
	}
	placeholder := []byte(`["` + errorCodesPlaceholder + `"]`)
	before, after, found := bytes.Cut(template, placeholder)
	if !found || bytes.Contains(after, placeholder) {
		return nil, fmt.Errorf("error envelope schema %s: want exactly one %s", errorEnvelopeFile, placeholder)
	}
	enum, err := json.Marshal(codes)
	if err != nil {
		return nil, fmt.Errorf("error envelope schema: %w", err)
	}
	return slices.Concat(before, enum, after), nil
}

// errorEnvelopeSchemaFromType generates the error envelope from ErrorBody
// with codes: what the committed envelope is made from.
func errorEnvelopeSchemaFromType(codes []string) (json.RawMessage, error) {
	s, err := jsonschema.For[ErrorBody](nil)
	if err != nil {
		return nil, fmt.Errorf("error envelope schema: %w", err)
	}
	s.Properties["code"].Enum = make([]any, len(codes))
	for i, c := range codes {
		s.Properties["code"].Enum[i] = c
	}
	next := s.Properties["next_action"]
	next.Type, next.Types = "object", nil
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("error envelope schema: %w", err)
	}
	return data, nil
}

// errorCodes are the codes an error result may carry: the caller's, then
// this package's own if the caller did not list them.
func errorCodes(registered []string) []string {
	codes := slices.Clone(registered)
	for _, own := range []string{CodeInvalidArgument, CodeOperationUnknown} {
		if !slices.Contains(codes, own) {
			codes = append(codes, own)
		}
	}
	return codes
}
