// Package toolschema generates the JSON Schemas (2020-12) of tool arguments
// and results from the Go types that decode and encode them
// (github.com/google/jsonschema-go): a struct is a closed object
// ("additionalProperties": false) whose fields without omitempty are
// required. What a type cannot say (patterns, bounds, enums, descriptions,
// "exactly one of") is added by edits naming the property, and the
// vocabularies shared by every tool (states, outcomes, operation_id,
// handles) are defined once here, from internal/operation.
//
// Tools serve their schemas from files generated this way ahead of time
// and committed next to them (Committed): generating a schema at run time
// costs reflection and a marshal of the schema tree, most of what building
// the tool set cost a cold start. Each package's
// TestCommittedSchemasAreGeneratedFromTheTypes requires the files to be
// what Of makes of the types today (internal/committedschema).
package toolschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/intentgate/intentgate/internal/operation"
)

// Edit adds to a generated schema what its Go type cannot say.
type Edit func(*jsonschema.Schema)

// Of is the schema of T with edits applied, as JSON text. It panics on a
// type jsonschema-go cannot describe or an edit naming a property T does
// not have: both are programming errors, found by any test that builds
// the tool.
func Of[T any](edits ...Edit) string {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("toolschema: %v", err))
	}
	for _, e := range edits {
		e(s)
	}
	data, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolschema: encoding the schema of %T: %v", *new(T), err))
	}
	return string(data)
}

// Committed is the schema committed as file in files (a package's embedded
// schemas directory), compacted: byte for byte what Of generated when the
// file was written. It panics on a missing file: a programming error found
// by any test that builds the tool.
func Committed(files fs.FS, file string) string {
	indented, err := fs.ReadFile(files, file)
	if err != nil {
		panic(fmt.Sprintf("toolschema: committed schema: %v", err))
	}
	return compact(indented)
}

// compact drops the whitespace between the tokens of JSON text. It does not
// check the syntax as json.Compact does, at several times the speed: a
// committed file is json.Indent's output, checked by its package's test,
// and the server parses every schema it registers. Strings, most of a
// schema's bytes (its descriptions), are copied whole: their closing quote
// is found with bytes.IndexByte, and is one when an even number of
// backslashes precedes it.
func compact(text []byte) string {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case ' ', '\n', '\t', '\r':
		case '"':
			end := closingQuote(text, i+1)
			out = append(out, text[i:end+1]...)
			i = end
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// closingQuote is the index of the quote ending the string whose first
// byte after the opening quote is at from; len(text)-1 if it never ends.
func closingQuote(text []byte, from int) int {
	for from < len(text) {
		q := bytes.IndexByte(text[from:], '"')
		if q < 0 {
			break
		}
		q += from
		backslashes := 0
		for j := q - 1; j >= from && text[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		from = q + 1
	}
	return len(text) - 1
}

// Property applies edits to the named property.
func Property(name string, edits ...Edit) Edit {
	return func(s *jsonschema.Schema) {
		p, ok := s.Properties[name]
		if !ok {
			panic(fmt.Sprintf("toolschema: no property %q", name))
		}
		for _, e := range edits {
			e(p)
		}
	}
}

// Items applies edits to an array's item schema.
func Items(edits ...Edit) Edit {
	return func(s *jsonschema.Schema) {
		for _, e := range edits {
			e(s.Items)
		}
	}
}

// Describe sets the description.
func Describe(text string) Edit { return func(s *jsonschema.Schema) { s.Description = text } }

// Pattern sets the regular expression a string must match.
func Pattern(re string) Edit { return func(s *jsonschema.Schema) { s.Pattern = re } }

// Length bounds a string's length in characters.
func Length(minimum, maximum int) Edit {
	return func(s *jsonschema.Schema) { s.MinLength, s.MaxLength = &minimum, &maximum }
}

// MinLength sets a string's minimum length.
func MinLength(n int) Edit { return func(s *jsonschema.Schema) { s.MinLength = &n } }

// NotNegative bounds an integer below by zero.
func NotNegative() Edit { return func(s *jsonschema.Schema) { s.Minimum = jsonschema.Ptr(0.0) } }

// DateTime marks a string as an RFC 3339 date-time (time.Time fields).
func DateTime() Edit { return func(s *jsonschema.Schema) { s.Format = "date-time" } }

// Const fixes the value.
func Const(v any) Edit { return func(s *jsonschema.Schema) { s.Const = &v } }

// Enum lists the allowed values.
func Enum[T ~string](values ...T) Edit {
	return func(s *jsonschema.Schema) {
		s.Enum = make([]any, len(values))
		for i, v := range values {
			s.Enum[i] = string(v)
		}
	}
}

// NeverNull drops "null" from a pointer's or slice's types: the field is
// omitted when empty (omitempty), or always set, never null.
func NeverNull() Edit {
	return func(s *jsonschema.Schema) {
		for _, t := range s.Types {
			if t != "null" {
				s.Type, s.Types = t, nil
				return
			}
		}
	}
}

// Required replaces the required properties: for a result whose fields are
// always written but only some of which a caller may rely on.
func Required(names ...string) Edit {
	return func(s *jsonschema.Schema) { s.Required = names }
}

// ExactlyOne requires exactly one of the named properties.
func ExactlyOne(names ...string) Edit {
	return func(s *jsonschema.Schema) {
		s.OneOf = nil
		for _, n := range names {
			s.OneOf = append(s.OneOf, &jsonschema.Schema{Required: []string{n}})
		}
	}
}

// HandlePattern is the syntax of an operation's public handle
// (operation.ValidateHandle).
const HandlePattern = "^op_[a-z2-7]{26}$"

// Handle is an operation handle property.
func Handle() Edit { return Pattern(HandlePattern) }

// OperationID is the caller's key property (operation.ValidateOperationID),
// described with text.
func OperationID(text string) Edit {
	return func(s *jsonschema.Schema) {
		Length(operation.MinOperationIDLen, operation.MaxOperationIDLen)(s)
		Pattern("^[A-Za-z0-9._:-]+$")(s)
		Describe(text)(s)
	}
}

// State is an operation state property: one of operation.AllStates.
func State() Edit { return Enum(operation.AllStates()...) }

// Outcome is an operation outcome property: one of operation.AllOutcomes.
func Outcome() Edit { return Enum(operation.AllOutcomes()...) }
