package mcpserver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const nestedSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "customer": {
      "type": "object",
      "additionalProperties": false,
      "properties": {"id": {"type": "string", "minLength": 3}, "tier": {"enum": ["gold", "silver"]}},
      "required": ["id"]
    },
    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3}},
    "count": {"type": "integer", "exclusiveMinimum": 0},
    "mode": {"const": "strict"},
    "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
  }
}`

func TestArgumentProblemsAreDescribedBriefly(t *testing.T) {
	s := mustSchema(t, nestedSchema)
	cases := []struct {
		args string
		want string
	}{
		{`{"customer":{"id":"abc","x":1}}`, `customer: unexpected property "x"`},
		{`{"customer":{}}`, `customer: missing required property "id"`},
		{`{"customer":{"id":"ab"}}`, `customer.id: length must be >= 3`},
		{`{"customer":{"id":"abc","tier":"bronze"}}`, `customer.tier: must be one of ["gold","silver"]`},
		{`{"tags":["a","b","c"]}`, `tags: must have at most 2 items`},
		{`{"tags":["a","long"]}`, `tags[1]: length must be <= 3`},
		{`{"count":0}`, `count: must be > 0`},
		{`{"mode":"lax"}`, `mode: must equal "strict"`},
		{`{"either":true}`, `either: does not match any of the allowed forms`},
		{`{"customer":{"id":"abc","id":"abd"}}`, `customer: duplicate property "id"`},
		{`[1]`, `arguments must be a JSON object`},
		{`"x"`, `arguments must be a JSON object`},
		{strings.Repeat(`{"customer":`, 40) + `1` + strings.Repeat(`}`, 40), `arguments are nested deeper than 32 levels`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			args, problem := checkArguments(s, []byte(tc.args))
			assert.Nil(t, args)
			assert.Equal(t, tc.want, problem)
		})
	}
}

func TestUnexplainedFailureFallsBackToAShortenedLibraryMessage(t *testing.T) {
	s := mustSchema(t, nestedSchema)
	withRef := mustSchema(t, `{"type":"object","$defs":{"id":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/id"}}}`)
	_, problem := checkArguments(withRef, []byte(`{"a":1}`))
	assert.Equal(t, `type: 1 has type "integer", want "string"`, problem)

	long := strings.Repeat("y", 2000)
	msg := shortenLibraryError(assertError(t, s, `{"customer":{"id":"abc","tier":"`+long+`"}}`))
	assert.NotContains(t, msg, long, "instance values are not echoed in full")
}

func assertError(t *testing.T, s *compiledSchema, args string) error {
	t.Helper()
	_, err := s.validateJSON([]byte(args))
	require.Error(t, err)
	return err
}

func TestValidArgumentsPassThroughUnchanged(t *testing.T) {
	s := mustSchema(t, nestedSchema)
	for _, in := range []string{`{"customer":{"id":"abc"},"tags":["a"],"count":2,"mode":"strict","either":3}`, ` {} `} {
		args, problem := checkArguments(s, []byte(in))
		require.Empty(t, problem)
		assert.Equal(t, strings.TrimSpace(in), string(args))
	}
	args, problem := checkArguments(s, nil)
	require.Empty(t, problem)
	assert.Equal(t, "{}", string(args), "absent arguments are an empty object")
}

// The library decides; the message names the property (the first in name
// order when several are refused, so the answer is the same every time)
// and the keyword that refused.
func TestArgumentProblemsNameTheFirstRefusedPropertyAndTheKeyword(t *testing.T) {
	s := mustSchema(t, `{"type":"object","additionalProperties":false,
	  "properties":{"a":{"type":"string"},"b":{"type":"string"},"handle":{"type":"string"},"operation_id":{"type":"string"}},
	  "oneOf":[{"required":["operation_id"]},{"required":["handle"]}]}`)
	for range 20 {
		_, problem := checkArguments(s, []byte(`{"b":1,"a":2,"handle":"h"}`))
		assert.Equal(t, "a: must be a string", problem)
	}
}

// A choice between properties (oneOf or anyOf whose every form only
// requires properties, as get_operation's operation_id or handle) is
// refused by naming them, not "the allowed forms" the caller never sees.
func TestAChoiceBetweenPropertiesIsRefusedNamingThem(t *testing.T) {
	props := `"properties":{"a":{"type":"string"},"handle":{"type":"string"},"operation_id":{"type":"string"}}`
	oneOf := mustSchema(t, `{"type":"object","additionalProperties":false,`+props+`,
	  "oneOf":[{"required":["operation_id"]},{"required":["handle"]}]}`)
	_, problem := checkArguments(oneOf, []byte(`{"handle":"h","operation_id":"o"}`))
	assert.Equal(t, `give exactly one of "operation_id" or "handle", not both`, problem)
	_, problem = checkArguments(oneOf, []byte(`{"a":"x"}`))
	assert.Equal(t, `give exactly one of "operation_id" or "handle"`, problem)

	anyOf := mustSchema(t, `{"type":"object","additionalProperties":false,`+props+`,
	  "anyOf":[{"required":["operation_id"]},{"required":["handle"]},{"required":["a"]}]}`)
	_, problem = checkArguments(anyOf, []byte(`{}`))
	assert.Equal(t, `give at least one of "operation_id", "handle" or "a"`, problem)

	// Forms that are more than a choice of properties keep the general words.
	shapes := mustSchema(t, `{"type":"object",`+props+`,
	  "oneOf":[{"required":["handle"],"properties":{"handle":{"minLength":3}}},{"required":["a"]}]}`)
	_, problem = checkArguments(shapes, []byte(`{"handle":"h"}`))
	assert.Equal(t, "does not match any of the allowed forms", problem)
	_, problem = checkArguments(shapes, []byte(`{"handle":"hhh","a":"x"}`))
	assert.Equal(t, "must match exactly one of the allowed forms, not several", problem)
}

// A string refused for its length or pattern says what the property is
// (its description), so "length must be >= 40" comes with "the full
// commit id" and a caller can fix the value, not only the count.
func TestAStringRefusedForItsShapeIsToldWhatThePropertyIs(t *testing.T) {
	s := mustSchema(t, `{"type":"object","additionalProperties":false,"properties":{
	  "commit":{"type":"string","minLength":40,"maxLength":40,"pattern":"^[0-9a-f]*$",
	    "description":"Full commit id (40 lowercase hex digits); an abbreviation is refused."},
	  "plain":{"type":"string","minLength":2}}}`)
	_, problem := checkArguments(s, []byte(`{"commit":"abc1234"}`))
	assert.Equal(t, "commit: length must be >= 40 (full commit id (40 lowercase hex digits); an abbreviation is refused)", problem)
	_, problem = checkArguments(s, []byte(`{"commit":"`+strings.Repeat("A", 40)+`"}`))
	assert.Equal(t, "commit: must match the pattern ^[0-9a-f]*$ (full commit id (40 lowercase hex digits); an abbreviation is refused)", problem)
	_, problem = checkArguments(s, []byte(`{"plain":"x"}`))
	assert.Equal(t, "plain: length must be >= 2", problem, "nothing to add without a description")
	_, problem = checkArguments(s, []byte(`{"commit":1}`))
	assert.Equal(t, "commit: must be a string", problem, "a wrong type needs no description")
}
