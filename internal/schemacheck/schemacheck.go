// Package schemacheck validates MCP tool results against the outputSchema a
// server advertised, with a JSON Schema 2020-12 implementation that is not
// the one the server is built on (github.com/santhosh-tekuri/jsonschema,
// not google/jsonschema-go): a schema and a result that only agree with
// each other's library would pass a check made with that library alone.
//
// Tests use it; the server never imports it.
package schemacheck

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is one compiled output schema.
type Schema struct {
	schema *jsonschema.Schema
}

// Compile compiles a JSON Schema 2020-12 document (JSON text or a decoded
// value, as an MCP client receives it in tools/list). Formats are asserted,
// as a strict client does.
func Compile(doc any) (*Schema, error) {
	data, ok := doc.([]byte)
	if !ok {
		if raw, isRaw := doc.(json.RawMessage); isRaw {
			data = raw
		} else {
			var err error
			if data, err = json.Marshal(doc); err != nil {
				return nil, fmt.Errorf("encoding schema: %w", err)
			}
		}
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "mem:///output-schema.json"
	if err := c.AddResource(url, value); err != nil {
		return nil, fmt.Errorf("adding schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling schema: %w", err)
	}
	return &Schema{schema: s}, nil
}

// Validate checks a structuredContent value (JSON text or a decoded value).
func (s *Schema) Validate(structured any) error {
	data, ok := structured.([]byte)
	if !ok {
		if raw, isRaw := structured.(json.RawMessage); isRaw {
			data = raw
		} else {
			var err error
			if data, err = json.Marshal(structured); err != nil {
				return fmt.Errorf("encoding structuredContent: %w", err)
			}
		}
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("decoding structuredContent: %w", err)
	}
	if err := s.schema.Validate(value); err != nil {
		return fmt.Errorf("structuredContent %s: %w", data, err)
	}
	return nil
}
