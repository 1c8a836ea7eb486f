package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxArgumentDepth bounds nesting in tool arguments; no tool needs more and
// the duplicate-key walk below recurses once per level.
const maxArgumentDepth = 32

// maxProblemLen bounds the message of an INVALID_ARGUMENT result so a caller
// cannot make us echo a large payload back.
const maxProblemLen = 300

// checkArguments validates raw tool arguments against the tool's input
// schema. It returns the arguments to hand to the tool ("{}" when the caller
// sent none) or a short, caller-facing description of the first problem.
//
// jsonschema-go gives the verdict; explain only words the message, so a
// schema feature explain does not know still fails validation, with the
// library's (shortened) message.
func checkArguments(in *compiledSchema, raw json.RawMessage) (json.RawMessage, string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return nil, "arguments must be a JSON object"
	}
	// An undeclared top-level property is the cheapest refusal: one shallow
	// decode, before the token walk and the schema validation, whose cost
	// grows with everything nested under it.
	if problem := findUndeclaredProperty(in.schema, trimmed); problem != "" {
		return nil, limit(problem)
	}
	// Duplicate keys are legal JSON but parsers disagree on which one wins;
	// the arguments we validate must be the arguments every later reader sees.
	if problem := findDuplicateKey(trimmed); problem != "" {
		return nil, problem
	}
	value, err := in.validateJSON(trimmed)
	if err == nil {
		return json.RawMessage(trimmed), ""
	}
	if value == nil {
		return nil, "arguments are not valid JSON"
	}
	if problem := explain(in.schema, value, ""); problem != "" {
		return nil, limit(problem)
	}
	return nil, limit(shortenLibraryError(err))
}

// findUndeclaredProperty names the undeclared top-level properties of data
// when the schema's root is closed (additionalProperties false). Values are
// only skipped, not decoded.
func findUndeclaredProperty(s *jsonschema.Schema, data []byte) string {
	if !isFalseSchema(s.AdditionalProperties) {
		return ""
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "" // the later checks say what is wrong
	}
	var unexpected []string
	for name := range top {
		if _, declared := s.Properties[name]; !declared && !matchesPatternProperty(s, name) {
			unexpected = append(unexpected, strconv.Quote(shorten(name, 32)))
		}
	}
	if len(unexpected) == 0 {
		return findScalarMismatch(s, top)
	}
	slices.Sort(unexpected)
	noun := "property"
	if len(unexpected) > 1 {
		noun = "properties"
	}
	return fmt.Sprintf("unexpected %s %s", noun, strings.Join(unexpected, ", "))
}

// findScalarMismatch refuses a container (array or object) where a
// top-level property's schema admits only scalars: the walks below would
// otherwise visit every element of, say, a huge array sent as "reason".
func findScalarMismatch(s *jsonschema.Schema, top map[string]json.RawMessage) string {
	names := make([]string, 0, len(top))
	for name := range top {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sub := s.Properties[name]
		raw := top[name]
		if sub == nil || len(raw) == 0 || (raw[0] != '[' && raw[0] != '{') {
			continue
		}
		types := sub.Types
		if sub.Type != "" {
			types = []string{sub.Type}
		}
		if len(types) > 0 && !slices.Contains(types, "array") && !slices.Contains(types, "object") {
			if len(types) == 1 {
				return prefixed(name, "must be "+withArticle(types[0]))
			}
			return prefixed(name, "must be one of the types "+strings.Join(types, ", "))
		}
	}
	return ""
}

func shorten(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}

// findDuplicateKey walks data (valid JSON) and describes the first object key
// that appears twice, or nesting deeper than maxArgumentDepth.
func findDuplicateKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	problem, err := walkJSON(dec, "", 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "arguments are not valid JSON"
	}
	return problem
}

func walkJSON(dec *json.Decoder, path string, depth int) (string, error) {
	if depth > maxArgumentDepth {
		return fmt.Sprintf("arguments are nested deeper than %d levels", maxArgumentDepth), nil
	}
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return "", nil
	}
	switch delim {
	case '{':
		seen := make(map[string]bool)
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return "", err
			}
			key, _ := keyTok.(string)
			if seen[key] {
				return prefixed(path, fmt.Sprintf("duplicate property %q", key)), nil
			}
			seen[key] = true
			if problem, err := walkJSON(dec, joinProperty(path, key), depth+1); problem != "" || err != nil {
				return problem, err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if problem, err := walkJSON(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); problem != "" || err != nil {
				return problem, err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

// explain describes why value does not satisfy s, for the keywords tool
// input schemas use. It returns "" when it cannot tell (e.g. $ref, allOf).
func explain(s *jsonschema.Schema, value any, path string) string {
	if s == nil || s.Ref != "" || s.DynamicRef != "" {
		return ""
	}
	if isFalseSchema(s) {
		return prefixed(path, "no value is allowed here")
	}
	if s.Type != "" && !typeMatches(value, s.Type) {
		return prefixed(path, "must be "+withArticle(s.Type))
	}
	if len(s.Types) > 0 && !slices.ContainsFunc(s.Types, func(t string) bool { return typeMatches(value, t) }) {
		return prefixed(path, "must be one of the types "+strings.Join(s.Types, ", "))
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonEqual(e, value) }) {
		return prefixed(path, "must be one of "+string(mustMarshal(s.Enum)))
	}
	if s.Const != nil && !jsonEqual(*s.Const, value) {
		return prefixed(path, "must equal "+string(mustMarshal(*s.Const)))
	}
	for _, alternatives := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		if len(alternatives) > 0 && !slices.ContainsFunc(alternatives, func(alt *jsonschema.Schema) bool {
			return explain(alt, value, path) == ""
		}) {
			return prefixed(path, "does not match any of the allowed forms")
		}
	}
	switch v := value.(type) {
	case string:
		return explainString(s, v, path)
	case float64:
		return explainNumber(s, v, path)
	case []any:
		return explainArray(s, v, path)
	case map[string]any:
		return explainObject(s, v, path)
	}
	return ""
}

func explainString(s *jsonschema.Schema, v, path string) string {
	n := utf8.RuneCountInString(v)
	if s.MinLength != nil && n < *s.MinLength {
		return prefixed(path, fmt.Sprintf("length must be >= %d", *s.MinLength))
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		return prefixed(path, fmt.Sprintf("length must be <= %d", *s.MaxLength))
	}
	if s.Pattern != "" {
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
			return prefixed(path, "must match the pattern "+s.Pattern)
		}
	}
	return ""
}

func explainNumber(s *jsonschema.Schema, v float64, path string) string {
	switch {
	case s.Minimum != nil && v < *s.Minimum:
		return prefixed(path, "must be >= "+formatNumber(*s.Minimum))
	case s.Maximum != nil && v > *s.Maximum:
		return prefixed(path, "must be <= "+formatNumber(*s.Maximum))
	case s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum:
		return prefixed(path, "must be > "+formatNumber(*s.ExclusiveMinimum))
	case s.ExclusiveMaximum != nil && v >= *s.ExclusiveMaximum:
		return prefixed(path, "must be < "+formatNumber(*s.ExclusiveMaximum))
	case s.MultipleOf != nil && *s.MultipleOf != 0 && math.Mod(v, *s.MultipleOf) != 0:
		return prefixed(path, "must be a multiple of "+formatNumber(*s.MultipleOf))
	}
	return ""
}

func explainArray(s *jsonschema.Schema, v []any, path string) string {
	if s.MinItems != nil && len(v) < *s.MinItems {
		return prefixed(path, fmt.Sprintf("must have at least %d items", *s.MinItems))
	}
	if s.MaxItems != nil && len(v) > *s.MaxItems {
		return prefixed(path, fmt.Sprintf("must have at most %d items", *s.MaxItems))
	}
	for i, item := range v {
		var itemSchema *jsonschema.Schema
		switch {
		case i < len(s.PrefixItems):
			itemSchema = s.PrefixItems[i]
		case s.Items != nil:
			itemSchema = s.Items
		}
		if itemSchema == nil {
			continue
		}
		if problem := explain(itemSchema, item, fmt.Sprintf("%s[%d]", path, i)); problem != "" {
			return problem
		}
	}
	return ""
}

// explainObject reports unexpected properties first (the usual model
// mistake), then missing ones, then the first bad property value.
func explainObject(s *jsonschema.Schema, v map[string]any, path string) string {
	if isFalseSchema(s.AdditionalProperties) {
		var unexpected []string
		for name := range v {
			if _, declared := s.Properties[name]; !declared && !matchesPatternProperty(s, name) {
				unexpected = append(unexpected, strconv.Quote(name))
			}
		}
		if len(unexpected) > 0 {
			slices.Sort(unexpected)
			noun := "property"
			if len(unexpected) > 1 {
				noun = "properties"
			}
			return prefixed(path, fmt.Sprintf("unexpected %s %s", noun, strings.Join(unexpected, ", ")))
		}
	}
	for _, name := range s.Required {
		if _, ok := v[name]; !ok {
			return prefixed(path, fmt.Sprintf("missing required property %q", name))
		}
	}
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sub, declared := s.Properties[name]
		if !declared {
			sub = s.AdditionalProperties
		}
		if problem := explain(sub, v[name], joinProperty(path, name)); problem != "" {
			return problem
		}
	}
	if s.MinProperties != nil && len(v) < *s.MinProperties {
		return prefixed(path, fmt.Sprintf("must have at least %d properties", *s.MinProperties))
	}
	if s.MaxProperties != nil && len(v) > *s.MaxProperties {
		return prefixed(path, fmt.Sprintf("must have at most %d properties", *s.MaxProperties))
	}
	return ""
}

func matchesPatternProperty(s *jsonschema.Schema, name string) bool {
	for pattern := range s.PatternProperties {
		if re, err := regexp.Compile(pattern); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

// typeMatches applies JSON Schema type names to a value decoded by
// encoding/json into any.
func typeMatches(v any, typ string) bool {
	switch v := v.(type) {
	case nil:
		return typ == "null"
	case bool:
		return typ == "boolean"
	case string:
		return typ == "string"
	case float64:
		return typ == "number" || typ == "integer" && v == math.Trunc(v) && !math.IsInf(v, 0)
	case []any:
		return typ == "array"
	case map[string]any:
		return typ == "object"
	}
	return false
}

func jsonEqual(a, b any) bool {
	var na, nb any
	if json.Unmarshal(mustMarshal(a), &na) != nil || json.Unmarshal(mustMarshal(b), &nb) != nil {
		return false
	}
	return reflect.DeepEqual(na, nb)
}

func withArticle(typ string) string {
	switch typ {
	case "integer", "object", "array":
		return "an " + typ
	case "null":
		return "null"
	}
	return "a " + typ
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func joinProperty(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func prefixed(path, problem string) string {
	if path == "" {
		return problem
	}
	return path + ": " + problem
}

// longValue matches quoted strings and long unquoted runs, the ways
// jsonschema-go echoes instance values in its messages.
var longValue = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\S{33,}`)

// shortenLibraryError keeps the first line of jsonschema-go's message minus
// its "validating <schema path>: " prefixes (schema paths mean nothing to
// the caller) and truncates the instance values it echoes.
func shortenLibraryError(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	for strings.HasPrefix(msg, "validating ") {
		_, rest, ok := strings.Cut(msg, ": ")
		if !ok {
			break
		}
		msg = rest
	}
	msg = strings.TrimSuffix(strings.TrimSpace(msg), ":")
	return longValue.ReplaceAllStringFunc(msg, func(v string) string {
		r := []rune(v)
		if len(r) <= 34 {
			return v
		}
		return string(r[:32]) + "…"
	})
}

func limit(msg string) string {
	if utf8.RuneCountInString(msg) <= maxProblemLen {
		return msg
	}
	return string([]rune(msg)[:maxProblemLen-1]) + "…"
}
