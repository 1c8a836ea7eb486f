package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// lambdaFunctionNameMax: "The length constraint applies only to the full
// ARN. If you specify only the function name, it is limited to 64
// characters in length" (Lambda API, CreateFunction, FunctionName).
const lambdaFunctionNameMax = 64

// Every function the template names after the stack must still be a valid
// Lambda name under the longest stack name -stack accepts: else a stack the
// deployer lets through fails in CloudFormation (CreateFunction refuses the
// name), and an existing stack with such a name can no longer be updated.
func TestEveryFunctionNameFitsTheLongestStackNameAccepted(t *testing.T) {
	longest := "s" + strings.Repeat("x", 52)
	_, err := parseArgs(context.Background(), []string{"-stack", longest})
	require.NoError(t, err, "the longest stack name -stack accepts")

	raw, err := os.ReadFile("../../template.yaml")
	require.NoError(t, err)
	var tpl struct {
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				FunctionName yaml.Node `yaml:"FunctionName"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tpl))
	checked := 0
	for id, res := range tpl.Resources {
		if res.Type != "AWS::Serverless::Function" && res.Type != "AWS::Lambda::Function" {
			continue
		}
		n := res.Properties.FunctionName
		require.Equal(t, "!Sub", n.Tag, "%s: FunctionName is named after the stack", id)
		name := strings.ReplaceAll(n.Value, "${AWS::StackName}", longest)
		require.NotContains(t, name, "${", "%s: %s", id, n.Value)
		assert.LessOrEqual(t, len(name), lambdaFunctionNameMax, "%s: %s is %d characters with a %d-character stack name", id, n.Value, len(name), len(longest))
		checked++
	}
	assert.GreaterOrEqual(t, checked, 4)
}

// operationsTableName is the name template.yaml gives the operations table
// of a stack: what the stack script looks for before a stack is created.
func operationsTableName(stack string) string { return stack + "-operations" }

func TestTheTableTheDeployLooksForIsTheTemplatesTable(t *testing.T) {
	raw, err := os.ReadFile("../../template.yaml")
	require.NoError(t, err)
	var tpl struct {
		Resources struct {
			OperationsTable struct {
				Properties struct {
					TableName yaml.Node `yaml:"TableName"`
				} `yaml:"Properties"`
			} `yaml:"OperationsTable"`
		} `yaml:"Resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tpl))
	n := tpl.Resources.OperationsTable.Properties.TableName
	require.Equal(t, "!Sub", n.Tag)
	assert.Equal(t, operationsTableName("ig-x"), strings.ReplaceAll(n.Value, "${AWS::StackName}", "ig-x"))
	assert.Contains(t, stackScript, `stack + "-operations"`, "the stack script's table name")
}
