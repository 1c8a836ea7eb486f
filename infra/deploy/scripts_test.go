package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/localengine"
)

// scriptPython is the engine virtualenv's Python, which has boto3 (moto
// depends on it), as the tools virtualenv has.
func scriptPython(t *testing.T) string {
	t.Helper()
	root, err := localengine.RepoRoot()
	require.NoError(t, err)
	python := filepath.Join(root, ".venv", "bin", "python")
	_, err = os.Stat(python)
	require.NoError(t, err, "make test builds the engine virtualenv first")
	return python
}

// runScript runs one of the account scripts as deploy does, with env as
// the whole AWS environment.
func runScript(t *testing.T, python, script string, env []string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), python, "-c", script, "ig-script-test", "us-east-1")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, env...)
	var out, errOut []byte
	out, err = cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		errOut = ee.Stderr
	}
	return string(out), string(errOut), err
}

// scriptsAgainstMoto starts a local moto server for the boto3 scripts and
// returns the Python to run them with and the environment that points
// them at it.
func scriptsAgainstMoto(t *testing.T) (python string, aws []string, engine *localengine.Engine) {
	t.Helper()
	python = scriptPython(t)
	engine, err := localengine.StartMoto(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = engine.Stop() })
	return python, []string{"AWS_ENDPOINT_URL=" + engine.Endpoint(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}, engine
}

// The boto3 scripts deploy runs, against a local AWS-compatible engine:
// a stack that is not there reads as none, the account's concurrency is
// read, and missing credentials are one line saying so, exit status 2.
func TestTheAccountScriptsReadTheStackAndTheAccount(t *testing.T) {
	python, aws, engine := scriptsAgainstMoto(t)

	out, stderr, err := runScript(t, python, stackScript, aws)
	require.NoError(t, err, stderr)
	var st stackState
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, stackState{}, st, "no stack")

	// A stack: its status, endpoint output and ResourceUrl parameter.
	create := `
import boto3, json
cf = boto3.client("cloudformation", region_name="us-east-1")
cf.create_stack(StackName="ig-script-test", Parameters=[{"ParameterKey": "ResourceUrl", "ParameterValue": "https://mcp.example.com/mcp"}],
    TemplateBody=json.dumps({"Parameters": {"ResourceUrl": {"Type": "String"}},
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"McpEndpointUrl": {"Value": "https://abc.execute-api.us-east-1.amazonaws.com/mcp"}}}))
`
	_, stderr, err = runScript(t, python, create, aws)
	require.NoError(t, err, stderr)
	out, stderr, err = runScript(t, python, stackScript, aws)
	require.NoError(t, err, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, stackState{Endpoint: "https://abc.execute-api.us-east-1.amazonaws.com/mcp", ResourceURL: "https://mcp.example.com/mcp", Status: "CREATE_COMPLETE"}, st)

	// The SecureStrings' metadata, never their values.
	put := `
import boto3
ssm = boto3.client("ssm", region_name="us-east-1")
ssm.put_parameter(Name="/ig/risk", Value="secret-risk-key", Type="SecureString")
ssm.put_parameter(Name="/ig/plain", Value="plain-key", Type="String")
`
	_, stderr, err = runScript(t, python, put, aws)
	require.NoError(t, err, stderr)
	cmd := exec.CommandContext(t.Context(), python, "-c", ssmScript, "us-east-1", "/ig/risk", "/ig/plain", "/ig/missing")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}, aws...)
	raw, err := cmd.Output()
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "secret-risk-key")
	var facts ssmFacts
	require.NoError(t, json.Unmarshal(raw, &facts), string(raw))
	assert.Equal(t, "SecureString", facts.Parameters["/ig/risk"].Type)
	assert.Equal(t, "String", facts.Parameters["/ig/plain"].Type)
	assert.NotContains(t, facts.Parameters, "/ig/missing")

	// The engine answers Lambda's GetAccountSettings with a 404: a refused
	// call, which the script reports in a line naming the permissions.
	_, stderr, err = runScript(t, python, accountScript, aws)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, stderr, "lambda:GetAccountSettings")
	assert.NotContains(t, stderr, "Traceback")

	for _, script := range []string{stackScript, accountScript} {
		_, stderr, err = runScript(t, python, script, []string{"AWS_ENDPOINT_URL=" + engine.Endpoint(), "AWS_REGION=us-east-1"})
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, 2, exit.ExitCode())
		assert.Contains(t, stderr, "no AWS credentials")
		assert.NotContains(t, stderr, "Traceback")
	}
}

// With no stack of its name, the stack script looks for the operations
// table an earlier stack of that name left (retained on delete), under the
// name the template gives it; a stack that exists is not asked about.
func TestTheStackScriptFindsTheTableAnEarlierStackLeft(t *testing.T) {
	python, aws, _ := scriptsAgainstMoto(t)

	create := `
import boto3
boto3.client("dynamodb", region_name="us-east-1").create_table(TableName="ig-script-test-operations",
    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    BillingMode="PAY_PER_REQUEST")
`
	_, stderr, err := runScript(t, python, create, aws)
	require.NoError(t, err, stderr)
	out, stderr, err := runScript(t, python, stackScript, aws)
	require.NoError(t, err, stderr)
	var st stackState
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, stackState{LeftTable: "ig-script-test-operations"}, st)
	assert.Equal(t, operationsTableName("ig-script-test"), st.LeftTable)
}

// The stage script lists the region's other intentgate stacks (those with
// the template's McpFunctionRevision parameter) with their Stage: not the
// stack being deployed, not another application's stack.
func TestTheStageScriptListsTheOtherIntentgateStacks(t *testing.T) {
	python, aws, _ := scriptsAgainstMoto(t)

	create := `
import boto3, json
cf = boto3.client("cloudformation", region_name="us-east-1")
def stack(name, params):
    cf.create_stack(StackName=name, Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
        TemplateBody=json.dumps({"Parameters": {k: {"Type": "String"} for k in params},
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}))
stack("ig-script-test", {"Stage": "dev", "McpFunctionRevision": "abcdef0123"})
stack("ig-alice", {"Stage": "dev", "McpFunctionRevision": "abcdef0123"})
stack("ig-prod", {"Stage": "prod", "McpFunctionRevision": "abcdef0123"})
stack("someone-else", {"Stage": "dev"})
`
	_, stderr, err := runScript(t, python, create, aws)
	require.NoError(t, err, stderr)
	out, stderr, err := runScript(t, python, stageScript, aws)
	require.NoError(t, err, stderr)
	var f stageFacts
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	assert.Equal(t, stageFacts{Stages: map[string]string{"ig-alice": "dev", "ig-prod": "prod"}}, f)
}
