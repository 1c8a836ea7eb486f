package app

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTemplateTaskIDKeyComesFromItsSecureString: MCP Tasks on Lambda need
// the task id key; the MCP function (the only one serving tasks) gets the
// SecureString's name, may read exactly that parameter, and starts with
// Tasks off when no name is given.
func TestTemplateTaskIDKeyComesFromItsSecureString(t *testing.T) {
	tpl := loadTemplate(t)
	assert.True(t, tpl.parameterAccepts(t, "TaskIdKeyParameterName", ""), "empty: Tasks off")
	assert.True(t, tpl.parameterAccepts(t, "TaskIdKeyParameterName", "/intentgate/prod/task-id-key"))
	assert.False(t, tpl.parameterAccepts(t, "TaskIdKeyParameterName", "intentgate/prod/task-id-key"), "the IAM ARN needs the leading slash")
	assert.False(t, tpl.parameterAccepts(t, "TaskIdKeyParameterName", "/intentgate/prod/task id key"))

	for _, name := range []string{"", "/intentgate/prod/task-id-key"} {
		t.Run("TaskIdKeyParameterName="+name, func(t *testing.T) {
			values := maps.Clone(templateSamples)
			values["TaskIdKeyParameterName"] = name
			ev := tpl.evaluator(t, values)
			arn := "arn:aws:ssm:us-east-1:123456789012:parameter" + name
			for _, fn := range tpl.functions(t) {
				v, present, err := ev.eval(fn.env["INTENTGATE_TASK_ID_KEY_PARAMETER"])
				require.NoError(t, err)
				role := strings.TrimSuffix(fn.id, "Function") + "FunctionRole"
				readable := ssmReadable(t, tpl, ev, role)
				if fn.codeURI != "functions/mcp" || name == "" {
					assert.False(t, present, "%s gets no task id key parameter", fn.id)
					assert.False(t, slices.ContainsFunc(readable, func(r string) bool { return strings.Contains(r, "task-id-key") }),
						"%s may read no task id key: %v", fn.id, readable)
					continue
				}
				assert.Equal(t, name, v, "%s reads the task id key from the parameter", fn.id)
				assert.Contains(t, readable, arn, "%s may read exactly that parameter", fn.id)
			}
		})
	}
}

// ssmReadable are the resources role may ssm:GetParameter.
func ssmReadable(t *testing.T, tpl samTemplate, ev templateEval, role string) []string {
	t.Helper()
	var out []string
	for _, pol := range tpl.resource(t, role).get("Properties", "Policies").Content {
		doc, _, err := ev.eval((*yamlNode)(pol).get("PolicyDocument"))
		require.NoError(t, err)
		for _, raw := range doc.(map[string]any)["Statement"].([]any) {
			st := raw.(map[string]any)
			if st["Action"] != "ssm:GetParameter" {
				continue
			}
			switch r := st["Resource"].(type) {
			case string:
				out = append(out, r)
			case []any:
				for _, x := range r {
					out = append(out, x.(string))
				}
			}
		}
	}
	return out
}
