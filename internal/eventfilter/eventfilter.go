// Package eventfilter evaluates Lambda event-filtering patterns (the
// FilterCriteria `Pattern` JSON of an event source mapping) against an event
// in the JSON shape Lambda filters on; for a DynamoDB stream that is the
// stream record: eventName, dynamodb.Keys, dynamodb.NewImage and OldImage
// with typed attribute values ({"S": "..."}, {"N": "5"}).
//
// The semantics follow Lambda's documented filter rule syntax:
//
//   - A pattern is a JSON object. Its keys are ANDed; a key whose value is an
//     object matches the event's object at that key (nested keys); a key
//     whose value is an array matches when ANY element of the array matches
//     the event's value (OR).
//   - Array elements: a string, number, boolean or null matches that exact
//     value ("" matches the empty string, null a JSON null; numbers compare
//     numerically); {"prefix": s}, {"suffix": s}, {"equals-ignore-case": s};
//     {"anything-but": v | [v...] | {"prefix": s} | {"suffix": s}};
//     {"numeric": [op, n (, op, n)]} with op one of = < <= > >=;
//     {"exists": true|false}.
//   - A key absent from the event matches only {"exists": false}. When the
//     event's value is an array, a matcher matches if it matches any element.
//   - Values are matched as the JSON has them: a DynamoDB number is the
//     string inside {"N": "5"}, so a numeric rule never matches it (match it
//     as a string).
//
// A pattern is validated when compiled: an unknown operator, a malformed
// operand or a non-object pattern is an error, never a rule that silently
// matches nothing.
//
// Why not a library. Quamina (github.com/timbray/quamina, Apache-2.0,
// module quamina.net/go/quamina/v2), the maintained EventBridge-pattern
// matcher, was evaluated as the engine behind this package's API and
// rejected:
//
//   - It cannot be built here: the Go module proxy serves no version of
//     quamina.net/go/quamina (nor of the github.com path), so `make test` on
//     a clean clone could not fetch it, and copying its source into the
//     repository would fork it.
//   - It would cover the two patterns template.yaml installs (exact string
//     and anything-but over a list of strings, inside typed DynamoDB
//     values), but not the Lambda rule syntax this package accepts and
//     tests: no "numeric" comparisons at all (numbers match by equality
//     only); no "suffix" (only a "wildcard" that would need escaping of
//     '*' in the operand); "anything-but" only over an array of strings
//     (not a single value, a number, {"prefix"} or {"suffix"}); and its
//     Exists and Anything-But patterns must stand alone in their array,
//     while this package ORs them with the array's other elements like
//     any rule.
//
// Keeping the rule set behind Compile and Criteria means a library can
// replace the matcher later without any caller (internal/streampoll)
// changing; the table tests in eventfilter_test.go are its specification.
package eventfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ErrInvalidPattern wraps every compile error.
var ErrInvalidPattern = errors.New("invalid filter pattern")

// Pattern is one compiled filter pattern.
type Pattern struct {
	source string
	root   object
}

// Criteria is a FilterCriteria: its patterns are ORed. Empty criteria
// match every event (no filtering configured).
type Criteria []*Pattern

// object is a pattern node: every field must match (AND).
type object []field

type field struct {
	key    string
	nested object    // set when the pattern value is an object
	rules  []matcher // set when the pattern value is an array (OR)
}

// matcher tests one event value. present is false when the key is absent.
type matcher interface {
	match(v any, present bool) bool
}

// Compile parses and validates one pattern.
func Compile(pattern string) (*Pattern, error) {
	raw, err := decode([]byte(pattern))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPattern, err)
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: a pattern must be a JSON object, got %s", ErrInvalidPattern, kind(raw))
	}
	root, err := compileObject(m, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPattern, err)
	}
	return &Pattern{source: pattern, root: root}, nil
}

// CompileAll compiles the patterns of one FilterCriteria.
func CompileAll(patterns []string) (Criteria, error) {
	c := make(Criteria, 0, len(patterns))
	for i, p := range patterns {
		cp, err := Compile(p)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		c = append(c, cp)
	}
	return c, nil
}

// String is the pattern as given.
func (p *Pattern) String() string { return p.source }

// Match reports whether the decoded JSON event (as decoded by MatchJSON:
// objects are map[string]any, numbers json.Number) matches the pattern.
func (p *Pattern) Match(event any) bool {
	m, ok := event.(map[string]any)
	return ok && p.root.match(m)
}

// MatchJSON decodes event and matches it.
func (p *Pattern) MatchJSON(event []byte) (bool, error) {
	v, err := decode(event)
	if err != nil {
		return false, fmt.Errorf("filter event: %w", err)
	}
	return p.Match(v), nil
}

// Match reports whether any pattern matches; true when c is empty.
func (c Criteria) Match(event any) bool {
	if len(c) == 0 {
		return true
	}
	for _, p := range c {
		if p.Match(event) {
			return true
		}
	}
	return false
}

// MatchJSON decodes event once and matches it against every pattern.
func (c Criteria) MatchJSON(event []byte) (bool, error) {
	v, err := decode(event)
	if err != nil {
		return false, fmt.Errorf("filter event: %w", err)
	}
	return c.Match(v), nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func compileObject(m map[string]any, path string) (object, error) {
	if len(m) == 0 {
		return nil, fmt.Errorf("%s: an empty object matches nothing useful", orRoot(path))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic error messages
	obj := make(object, 0, len(keys))
	for _, k := range keys {
		p := join(path, k)
		switch v := m[k].(type) {
		case map[string]any:
			nested, err := compileObject(v, p)
			if err != nil {
				return nil, err
			}
			obj = append(obj, field{key: k, nested: nested})
		case []any:
			if len(v) == 0 {
				return nil, fmt.Errorf("%s: an empty array matches nothing", p)
			}
			rules := make([]matcher, 0, len(v))
			for i, el := range v {
				r, err := compileRule(el, fmt.Sprintf("%s[%d]", p, i))
				if err != nil {
					return nil, err
				}
				rules = append(rules, r)
			}
			obj = append(obj, field{key: k, rules: rules})
		default:
			return nil, fmt.Errorf("%s: a value must be an object or an array of rules, got %s", p, kind(v))
		}
	}
	return obj, nil
}

func (o object) match(event map[string]any) bool {
	for _, f := range o {
		v, present := event[f.key]
		if f.nested != nil {
			m, ok := v.(map[string]any)
			if !present || !ok || !f.nested.match(m) {
				return false
			}
			continue
		}
		if !anyRule(f.rules, v, present) {
			return false
		}
	}
	return true
}

func anyRule(rules []matcher, v any, present bool) bool {
	for _, r := range rules {
		if r.match(v, present) {
			return true
		}
	}
	return false
}

func compileRule(el any, path string) (matcher, error) {
	switch v := el.(type) {
	case nil, string, bool:
		return exact{want: v}, nil
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		return exactNumber(f), nil
	case map[string]any:
		if len(v) != 1 {
			return nil, fmt.Errorf("%s: a rule object has exactly one operator, got %d", path, len(v))
		}
		for op, arg := range v {
			return compileOperator(op, arg, path)
		}
	}
	return nil, fmt.Errorf("%s: a rule must be a value or an operator object, got %s", path, kind(el))
}

func compileOperator(op string, arg any, path string) (matcher, error) {
	switch op {
	case "prefix", "suffix", "equals-ignore-case":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("%s: %q needs a string, got %s", path, op, kind(arg))
		}
		return stringRule{op: op, operand: s}, nil
	case "exists":
		b, ok := arg.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: \"exists\" needs true or false, got %s", path, kind(arg))
		}
		return exists(b), nil
	case "numeric":
		return compileNumeric(arg, path)
	case "anything-but":
		return compileAnythingBut(arg, path)
	}
	return nil, fmt.Errorf("%s: unknown operator %q (want prefix, suffix, equals-ignore-case, anything-but, numeric or exists)", path, op)
}

func compileAnythingBut(arg any, path string) (matcher, error) {
	switch v := arg.(type) {
	case string, bool, nil:
		return anythingBut{inner: []matcher{exact{want: v}}}, nil
	case json.Number:
		r, err := compileRule(v, path)
		if err != nil {
			return nil, err
		}
		return anythingBut{inner: []matcher{r}}, nil
	case []any:
		if len(v) == 0 {
			return nil, fmt.Errorf("%s: \"anything-but\" needs at least one value", path)
		}
		inner := make([]matcher, 0, len(v))
		for i, el := range v {
			switch el.(type) {
			case string, json.Number, bool, nil:
			default:
				return nil, fmt.Errorf("%s: \"anything-but\"[%d] must be a plain value, got %s", path, i, kind(el))
			}
			r, err := compileRule(el, path)
			if err != nil {
				return nil, err
			}
			inner = append(inner, r)
		}
		return anythingBut{inner: inner}, nil
	case map[string]any:
		if len(v) != 1 {
			return nil, fmt.Errorf("%s: \"anything-but\" takes one of prefix or suffix", path)
		}
		for op, a := range v {
			if op != "prefix" && op != "suffix" && op != "equals-ignore-case" {
				return nil, fmt.Errorf("%s: \"anything-but\" supports prefix, suffix or equals-ignore-case, not %q", path, op)
			}
			r, err := compileOperator(op, a, path)
			if err != nil {
				return nil, err
			}
			return anythingBut{inner: []matcher{r}}, nil
		}
	}
	return nil, fmt.Errorf("%s: \"anything-but\" needs a value, an array of values or a prefix/suffix object, got %s", path, kind(arg))
}

func compileNumeric(arg any, path string) (matcher, error) {
	list, ok := arg.([]any)
	if !ok || (len(list) != 2 && len(list) != 4) {
		return nil, fmt.Errorf("%s: \"numeric\" needs [op, n] or [op, n, op, n]", path)
	}
	var n numeric
	for i := 0; i < len(list); i += 2 {
		op, ok := list[i].(string)
		if !ok {
			return nil, fmt.Errorf("%s: \"numeric\" operator %d is %s, not a string", path, i/2, kind(list[i]))
		}
		num, ok := list[i+1].(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: \"numeric\" operand of %q is %s, not a number", path, op, kind(list[i+1]))
		}
		f, err := num.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		switch op {
		case "=", "<", "<=", ">", ">=":
		default:
			return nil, fmt.Errorf("%s: unknown numeric operator %q (want = < <= > >=)", path, op)
		}
		if len(list) == 4 && op == "=" {
			return nil, fmt.Errorf("%s: \"=\" cannot be part of a range", path)
		}
		n = append(n, bound{op: op, n: f})
	}
	if len(n) == 2 {
		lowerFirst := strings.HasPrefix(n[0].op, ">") && strings.HasPrefix(n[1].op, "<")
		if !lowerFirst || n[0].n > n[1].n {
			return nil, fmt.Errorf("%s: a numeric range is [\">\"|\">=\", low, \"<\"|\"<=\", high] with low <= high", path)
		}
	}
	return n, nil
}

// exact matches one JSON value: string, bool or null.
type exact struct{ want any }

func (e exact) match(v any, present bool) bool {
	return present && someElement(v, func(x any) bool { return x == e.want })
}

// exactNumber matches a JSON number of the same value.
type exactNumber float64

func (e exactNumber) match(v any, present bool) bool {
	return present && someElement(v, func(x any) bool {
		f, ok := number(x)
		return ok && f == float64(e)
	})
}

type stringRule struct{ op, operand string }

func (r stringRule) match(v any, present bool) bool {
	return present && someElement(v, func(x any) bool {
		s, ok := x.(string)
		if !ok {
			return false
		}
		switch r.op {
		case "prefix":
			return strings.HasPrefix(s, r.operand)
		case "suffix":
			return strings.HasSuffix(s, r.operand)
		default:
			return strings.EqualFold(s, r.operand)
		}
	})
}

// anythingBut matches a present value that none of inner matches.
type anythingBut struct{ inner []matcher }

func (a anythingBut) match(v any, present bool) bool {
	if !present {
		return false
	}
	return someElement(v, func(x any) bool { return !anyRule(a.inner, x, true) })
}

type exists bool

func (e exists) match(v any, present bool) bool {
	if !present {
		return !bool(e)
	}
	// Lambda's exists applies to leaves: an object is not a value.
	if _, isObject := v.(map[string]any); isObject {
		return false
	}
	return bool(e)
}

type bound struct {
	op string
	n  float64
}

// numeric is one comparison or a two-sided range; every bound must hold.
type numeric []bound

func (n numeric) match(v any, present bool) bool {
	return present && someElement(v, func(x any) bool {
		f, ok := number(x)
		if !ok {
			return false
		}
		for _, b := range n {
			var ok bool
			switch b.op {
			case "=":
				ok = f == b.n
			case "<":
				ok = f < b.n
			case "<=":
				ok = f <= b.n
			case ">":
				ok = f > b.n
			case ">=":
				ok = f >= b.n
			}
			if !ok {
				return false
			}
		}
		return true
	})
}

// someElement applies pred to v, or to each element when v is an array.
func someElement(v any, pred func(any) bool) bool {
	if list, ok := v.([]any); ok {
		for _, el := range list {
			if pred(el) {
				return true
			}
		}
		return false
	}
	return pred(v)
}

func number(x any) (float64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "pattern"
	}
	return path
}
