package toolschema_test

import (
	"encoding/json"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/committedschema"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools/toolschema"
)

type example struct {
	ID      string            `json:"id"`
	State   string            `json:"state"`
	Outcome string            `json:"outcome"`
	Key     string            `json:"operation_id,omitempty"`
	Note    *string           `json:"note"`
	Tags    map[string]string `json:"tags,omitempty"`
}

func decode(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &m))
	return m
}

func TestAStructIsAClosedObjectRequiringItsFieldsWithoutOmitempty(t *testing.T) {
	s := decode(t, toolschema.Of[example]())
	assert.Equal(t, "object", s["type"])
	assert.Equal(t, false, s["additionalProperties"])
	assert.ElementsMatch(t, []any{"id", "state", "outcome", "note"}, s["required"])
	note := s["properties"].(map[string]any)["note"].(map[string]any)
	assert.ElementsMatch(t, []any{"null", "string"}, note["type"], "a pointer may be null")
}

func TestStatesAndOutcomesComeFromTheOperationPackage(t *testing.T) {
	s := decode(t, toolschema.Of[example](
		toolschema.Property("state", toolschema.State()), toolschema.Property("outcome", toolschema.Outcome())))
	props := s["properties"].(map[string]any)
	var states, outcomes []any
	for _, st := range operation.AllStates() {
		states = append(states, string(st))
	}
	for _, o := range operation.AllOutcomes() {
		outcomes = append(outcomes, string(o))
	}
	assert.Equal(t, states, props["state"].(map[string]any)["enum"])
	assert.Equal(t, outcomes, props["outcome"].(map[string]any)["enum"])
}

func TestEditsSayWhatTheTypeCannot(t *testing.T) {
	s := decode(t, toolschema.Of[example](
		toolschema.Property("id", toolschema.Handle()),
		toolschema.Property("operation_id", toolschema.OperationID("your key")),
		toolschema.Property("note", toolschema.NeverNull()),
		toolschema.ExactlyOne("id", "operation_id"),
		toolschema.Required("id"),
	))
	props := s["properties"].(map[string]any)
	assert.Equal(t, toolschema.HandlePattern, props["id"].(map[string]any)["pattern"])
	key := props["operation_id"].(map[string]any)
	assert.Equal(t, map[string]any{"type": "string", "minLength": float64(operation.MinOperationIDLen),
		"maxLength": float64(operation.MaxOperationIDLen), "pattern": "^[A-Za-z0-9._:-]+$", "description": "your key"}, key)
	assert.Equal(t, "string", props["note"].(map[string]any)["type"])
	assert.Equal(t, []any{map[string]any{"required": []any{"id"}}, map[string]any{"required": []any{"operation_id"}}}, s["oneOf"])
	assert.Equal(t, []any{"id"}, s["required"])
}

func TestAnEditNamingAnUnknownPropertyPanics(t *testing.T) {
	assert.PanicsWithValue(t, `toolschema: no property "nope"`, func() {
		toolschema.Of[example](toolschema.Property("nope", toolschema.Describe("x")))
	})
}

// Whitespace inside strings, escaped quotes and a string ending in a
// backslash are kept; only the indentation goes.
func TestACommittedSchemaIsServedAsTheBytesOfGenerated(t *testing.T) {
	generated := toolschema.Of[example](
		toolschema.Property("id", toolschema.Pattern("^<&>\t$"), toolschema.Describe("a \"quoted\" word,\n\ttabbed, ends in \\")),
		toolschema.Property("state", toolschema.Describe(`\" }, { "not": "a key" }`)))
	text, err := committedschema.Format(generated)
	require.NoError(t, err)
	files := fstest.MapFS{"schemas/example.input.json": {Data: text}}
	assert.Equal(t, generated, toolschema.Committed(files, "schemas/example.input.json"))
}

func TestAMissingCommittedSchemaPanics(t *testing.T) {
	assert.PanicsWithValue(t, "toolschema: committed schema: open schemas/nope.json: file does not exist", func() {
		toolschema.Committed(fstest.MapFS{}, "schemas/nope.json")
	})
}
