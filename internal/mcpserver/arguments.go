package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
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
// jsonschema-go gives the verdict; problemNode only words it (which
// property, which keyword), so a schema feature it does not word still
// fails validation, with the library's (shortened) message.
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
	if problem := in.problems.describe(value, ""); problem != "" {
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

// problemNode is one level of an input schema, kept to word the library's
// verdict: own is that level alone (its properties, items and
// additionalProperties schema replaced by the empty schema), so an error
// from own is about this level, and the children are the levels below. It
// re-derives no JSON Schema rule: jsonschema-go decides, level by level,
// and the node only knows where it is (the property path) and which of its
// keywords refused.
type problemNode struct {
	schema     *jsonschema.Schema
	own        *jsonschema.Resolved
	properties map[string]*problemNode
	additional *problemNode // undeclared properties, when additionalProperties is a schema
	items      *problemNode
	prefix     []*problemNode
}

// newProblemNode builds the node of s, or nil where s cannot be resolved
// on its own (e.g. a "$ref" into the root's "$defs"): there, the caller
// falls back to the library's own message.
func newProblemNode(s *jsonschema.Schema) *problemNode {
	if s == nil {
		return nil
	}
	level := s.CloneSchemas()
	n := &problemNode{schema: s}
	if len(s.Properties) > 0 {
		n.properties = make(map[string]*problemNode, len(s.Properties))
		level.Properties = make(map[string]*jsonschema.Schema, len(s.Properties))
		for name, sub := range s.Properties {
			n.properties[name] = newProblemNode(sub)
			level.Properties[name] = &jsonschema.Schema{}
		}
	}
	if s.AdditionalProperties != nil && !isFalseSchema(s.AdditionalProperties) {
		n.additional = newProblemNode(s.AdditionalProperties)
		level.AdditionalProperties = &jsonschema.Schema{}
	}
	if s.Items != nil {
		n.items = newProblemNode(s.Items)
		level.Items = &jsonschema.Schema{}
	}
	for i, sub := range s.PrefixItems {
		n.prefix = append(n.prefix, newProblemNode(sub))
		level.PrefixItems[i] = &jsonschema.Schema{}
	}
	own, err := level.Resolve(nil)
	if err != nil {
		return nil
	}
	n.own = own
	return n
}

// describe words why value (at path) does not satisfy the node's schema:
// this level's refusal first (the type, an unexpected property, a missing
// one), then the first property in name order, or item in index order,
// that is refused below. "" when the node cannot tell.
func (n *problemNode) describe(value any, path string) string {
	if n == nil {
		return ""
	}
	if err := n.own.Validate(value); err != nil {
		return prefixed(path, n.word(err))
	}
	switch v := value.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			child, declared := n.properties[name]
			if !declared {
				child = n.additional
			}
			if problem := child.describe(v[name], joinProperty(path, name)); problem != "" {
				return problem
			}
		}
	case []any:
		for i, item := range v {
			child := n.items
			if i < len(n.prefix) {
				child = n.prefix[i]
			}
			if problem := child.describe(item, fmt.Sprintf("%s[%d]", path, i)); problem != "" {
				return problem
			}
		}
	}
	return ""
}

// quoted matches the Go-quoted strings in jsonschema-go's messages. Compiled
// on first use: only refusals need it, and every cold start would pay for
// compiling it at package init.
var quoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"`) })

// word maps the library's error for this level to a short message: the
// keyword that refused (the message's first word), said with this
// schema's own bound, pattern or values. A keyword not mapped here keeps
// the library's (shortened) message.
func (n *problemNode) word(err error) string {
	msg := shortenLibraryError(err)
	s := n.schema
	keyword, _, _ := strings.Cut(msg, ":")
	switch keyword {
	case "type":
		if s.Type != "" {
			return "must be " + withArticle(s.Type)
		}
		return "must be one of the types " + strings.Join(s.Types, ", ")
	case "enum":
		return "must be one of " + string(mustMarshal(s.Enum))
	case "const":
		return "must equal " + string(mustMarshal(*s.Const))
	case "minLength":
		return fmt.Sprintf("length must be >= %d", *s.MinLength) + n.whatItIs()
	case "maxLength":
		return fmt.Sprintf("length must be <= %d", *s.MaxLength) + n.whatItIs()
	case "pattern":
		return "must match the pattern " + s.Pattern + n.whatItIs()
	case "minimum":
		return "must be >= " + formatNumber(*s.Minimum)
	case "maximum":
		return "must be <= " + formatNumber(*s.Maximum)
	case "exclusiveMinimum":
		return "must be > " + formatNumber(*s.ExclusiveMinimum)
	case "exclusiveMaximum":
		return "must be < " + formatNumber(*s.ExclusiveMaximum)
	case "multipleOf":
		return "must be a multiple of " + formatNumber(*s.MultipleOf)
	case "minItems":
		return fmt.Sprintf("must have at least %d items", *s.MinItems)
	case "maxItems":
		return fmt.Sprintf("must have at most %d items", *s.MaxItems)
	case "minProperties":
		return fmt.Sprintf("must have at least %d properties", *s.MinProperties)
	case "maxProperties":
		return fmt.Sprintf("must have at most %d properties", *s.MaxProperties)
	case "anyOf":
		if names := choiceOfProperties(s.AnyOf); names != nil {
			return "give at least one of " + listOr(names)
		}
		return "does not match any of the allowed forms"
	case "oneOf":
		names := choiceOfProperties(s.OneOf)
		switch several := strings.Contains(msg, "validated against both"); {
		case names != nil && several:
			return "give exactly one of " + listOr(names) + ", not both"
		case names != nil:
			return "give exactly one of " + listOr(names)
		case several:
			return "must match exactly one of the allowed forms, not several"
		}
		return "does not match any of the allowed forms"
	case "not":
		if isFalseSchema(s) {
			return "no value is allowed here"
		}
	case "required":
		// The library lists the missing properties in schema order.
		if names := namesIn(err); len(names) > 0 {
			return fmt.Sprintf("missing required property %q", names[0])
		}
	}
	if strings.HasPrefix(msg, "unexpected additional properties") {
		unexpected := namesIn(err)
		for i, name := range unexpected {
			unexpected[i] = strconv.Quote(name)
		}
		slices.Sort(unexpected)
		noun := "property"
		if len(unexpected) > 1 {
			noun = "properties"
		}
		return fmt.Sprintf("unexpected %s %s", noun, strings.Join(unexpected, ", "))
	}
	return msg
}

// namesIn are the Go-quoted strings of the first line of err's message
// (jsonschema-go quotes property names with %q).
func namesIn(err error) []string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	var names []string
	for _, q := range quoted().FindAllString(line, -1) {
		if name, uerr := strconv.Unquote(q); uerr == nil {
			names = append(names, name)
		}
	}
	return names
}

func matchesPatternProperty(s *jsonschema.Schema, name string) bool {
	for pattern := range s.PatternProperties {
		if re, err := regexp.Compile(pattern); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
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
// jsonschema-go echoes instance values in its messages. Compiled on first
// use, as quoted.
var longValue = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\S{33,}`) })

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
	return longValue().ReplaceAllStringFunc(msg, func(v string) string {
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

// choiceOfProperties returns the property each form requires when every
// form does nothing but require one property (get_operation's
// operation_id or handle); nil otherwise. The caller never sees "forms",
// only properties, so a refusal should name them.
func choiceOfProperties(forms []*jsonschema.Schema) []string {
	if len(forms) < 2 {
		return nil
	}
	names := make([]string, 0, len(forms))
	for _, f := range forms {
		if f == nil || len(f.Required) != 1 {
			return nil
		}
		// Nothing but the requirement: the form encodes as that alone.
		got, err := json.Marshal(f)
		want, werr := json.Marshal(&jsonschema.Schema{Required: f.Required})
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			return nil
		}
		names = append(names, f.Required[0])
	}
	return names
}

// listOr quotes names and joins them: "a" or "b"; "a", "b" or "c".
func listOr(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// maxDescriptionInRefusal bounds the description whatItIs adds: longer
// ones explain usage rather than shape, and the message is cut anyway.
const maxDescriptionInRefusal = 160

// whatItIs is the property's description, in parentheses, for a refusal
// of its shape: a length or pattern alone does not say what the value
// should be ("length must be >= 40" of a commit id). "" without one.
func (n *problemNode) whatItIs() string {
	d := strings.TrimSuffix(strings.TrimSpace(n.schema.Description), ".")
	if d == "" || len(d) > maxDescriptionInRefusal {
		return ""
	}
	first, size := utf8.DecodeRuneInString(d)
	if next, _ := utf8.DecodeRuneInString(d[size:]); !unicode.IsUpper(next) { // "URL ..." stays
		d = string(unicode.ToLower(first)) + d[size:]
	}
	return " (" + d + ")"
}
