package operator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/tools/operator"
)

// schema compiles a JSON Schema document the way the MCP layer does.
func schema(t *testing.T, doc string) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal([]byte(doc), &s))
	require.Equal(t, "object", s.Type)
	resolved, err := s.Resolve(nil)
	require.NoError(t, err)
	return resolved
}

func TestOperatorSchemasCompileAndAcceptTheirShapes(t *testing.T) {
	handle := "op_" + strings.Repeat("a", 26)
	for _, tc := range []struct {
		name, doc string
		good      []string
		bad       []string
	}{
		{"resolve", operator.ResolveInputSchema(),
			[]string{`{"handle":"` + handle + `","resolution":"SUCCEEDED","evidence":"kept ticket-9001","resource_id":"ticket-9001"}`,
				`{"operation_id":"deploy-ticket-1","resolution":"FAILED","evidence":"cancelled"}`},
			[]string{`{"handle":"` + handle + `","resolution":"MAYBE","evidence":"x"}`,
				`{"handle":"` + handle + `","resolution":"FAILED","evidence":""}`,
				`{"handle":"` + handle + `","resolution":"FAILED","evidence":"` + strings.Repeat("x", 1001) + `"}`,
				`{"resolution":"FAILED","evidence":"x"}`}},
		{"get_operation", operator.GetOperationInputSchema(),
			[]string{`{"operation_id":"deploy-ticket-1"}`, `{"handle":"` + handle + `"}`},
			[]string{`{}`, `{"handle":"op_short"}`, `{"operation_id":"deploy-ticket-1","handle":"` + handle + `"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := schema(t, tc.doc)
			for _, raw := range tc.good {
				var v any
				require.NoError(t, json.Unmarshal([]byte(raw), &v))
				assert.NoError(t, r.Validate(v), raw)
			}
			for _, raw := range tc.bad {
				var v any
				require.NoError(t, json.Unmarshal([]byte(raw), &v))
				assert.Error(t, r.Validate(v), raw)
			}
		})
	}
	schema(t, operator.ResolveOutputSchema())
}
