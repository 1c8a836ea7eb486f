package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/schemacheck"
)

// codeTool answers with the business error whose code it is asked for, or
// with a success when asked for none.
func codeTool() Tool {
	t := reviewTool(&recorder{})
	t.InputSchema = json.RawMessage(`{"type":"object","additionalProperties":false,
	  "properties":{"code":{"type":"string"},"order_id":{"type":"string","pattern":"^O[0-9]{11}$"}}}`)
	t.Handler = func(_ context.Context, call Call) *mcp.CallToolResult {
		var args struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(call.Arguments, &args)
		if args.Code == "" {
			return Success(map[string]string{"review_id": "R-1", "status": "PENDING"})
		}
		return BusinessError(args.Code, "refused", false, &NextAction{
			Tool: "get_operation", Arguments: map[string]string{"handle": "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, Hint: "look"})
	}
	return t
}

// TestEveryResultConformsToTheAdvertisedOutputSchema: the MCP specification
// requires every structured result to conform to the tool's outputSchema,
// errors included; clients that validate (the Inspector, the TypeScript
// SDK) refuse one that does not. Checked with an independent validator.
func TestEveryResultConformsToTheAdvertisedOutputSchema(t *testing.T) {
	srv := startServer(t, codeTool())
	for _, v := range clientVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, testContext(t), srv.URL, v)
			list, err := cs.ListTools(testContext(t), nil)
			require.NoError(t, err)
			require.Len(t, list.Tools, 1)
			schema, err := schemacheck.Compile(list.Tools[0].OutputSchema)
			require.NoError(t, err)

			calls := map[string]map[string]any{
				"success":                          {},
				"INVALID_ARGUMENT from the schema": {"order_id": "x"},
			}
			for _, code := range testCodes {
				calls[string(code)] = map[string]any{"code": string(code)}
			}
			for name, args := range calls {
				res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "request_risk_review", Arguments: args})
				require.NoError(t, err, name)
				assert.Equal(t, name != "success", res.IsError, name)
				assert.NoError(t, schema.Validate(res.StructuredContent), name)
			}
		})
	}
}

// TestAnErrorShapedSuccessDoesNotConform: the schema still tells a success
// from an error; a success body missing its own required fields fails.
func TestAnErrorShapedSuccessDoesNotConform(t *testing.T) {
	srv := startServer(t, codeTool())
	cs := connect(t, testContext(t), srv.URL, version20260728)
	list, err := cs.ListTools(testContext(t), nil)
	require.NoError(t, err)
	schema, err := schemacheck.Compile(list.Tools[0].OutputSchema)
	require.NoError(t, err)
	assert.Error(t, schema.Validate(map[string]any{"review_id": "R-1"}), "success without status")
	assert.Error(t, schema.Validate(map[string]any{"code": "NOT_FOUND", "message": "m"}), "error without retry_allowed")
	assert.Error(t, schema.Validate(map[string]any{"code": "NO_SUCH_CODE", "message": "m", "retry_allowed": false}), "unknown code")
}

// TestAnOutputSchemaThatPointsAtItsRootIsRefused: the advertised schema
// nests the tool's own, where a "$ref" to "#/$defs/..." would resolve
// against the union; registration says so instead of serving a broken one.
func TestAnOutputSchemaThatPointsAtItsRootIsRefused(t *testing.T) {
	for name, schema := range map[string]string{
		"$ref":  `{"type":"object","properties":{"a":{"$ref":"#/properties/b"},"b":{"type":"string"}}}`,
		"$defs": `{"type":"object","$defs":{"x":{"type":"string"}}}`,
	} {
		tool := reviewTool(&recorder{})
		tool.OutputSchema = json.RawMessage(schema)
		_, err := New(Config{Name: "n", Version: "v"}, tool)
		assert.ErrorContains(t, err, name, name)
	}
}

// A tool schema's dialect ("$schema") moves to the advertised union's root,
// where validators read it; nested, it would be ignored or refused.
func TestAnOutputSchemasDialectIsTheAdvertisedSchemasRoot(t *testing.T) {
	const dialect = "https://json-schema.org/draft/2020-12/schema"
	own := `{"$schema":"` + dialect + `","type":"object","properties":{"a":{"type":"string"}}}`
	got, err := advertisedOutputSchema(json.RawMessage(own), json.RawMessage(`{"type":"object"}`))
	require.NoError(t, err)
	var union struct {
		Schema string           `json:"$schema"`
		Type   string           `json:"type"`
		AnyOf  []map[string]any `json:"anyOf"`
	}
	require.NoError(t, json.Unmarshal(got, &union), "%s", got)
	assert.Equal(t, dialect, union.Schema)
	assert.Equal(t, "object", union.Type)
	require.Len(t, union.AnyOf, 2)
	assert.NotContains(t, union.AnyOf[0], "$schema")
	assert.Equal(t, map[string]any{"a": map[string]any{"type": "string"}}, union.AnyOf[0]["properties"])
	assert.Equal(t, map[string]any{"type": "object"}, union.AnyOf[1])

	withoutDialect, err := advertisedOutputSchema(json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type":"object"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"anyOf":[{"type":"object"},{"type":"object"}],"type":"object"}`, string(withoutDialect))
}
