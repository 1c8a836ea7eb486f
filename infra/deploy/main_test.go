package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAWS records the commands deploy runs and answers the account and
// stack-output queries as a real account would.
type fakeAWS struct {
	facts    accountFacts
	endpoint string
	ran      [][]string
}

func (f *fakeAWS) run(_ context.Context, _ io.Writer, cmd ...string) error {
	f.ran = append(f.ran, cmd)
	return nil
}

func (f *fakeAWS) output(_ context.Context, cmd ...string) ([]byte, error) {
	f.ran = append(f.ran, cmd)
	switch {
	case strings.Contains(cmd[2], "get_account_settings"):
		return json.Marshal(f.facts)
	case strings.Contains(cmd[2], "describe_stacks"):
		return []byte(f.endpoint + "\n"), nil
	}
	return nil, fmt.Errorf("unexpected command %v", cmd)
}

func (f *fakeAWS) deploys() [][]string {
	var out [][]string
	for _, c := range f.ran {
		if len(c) > 1 && c[1] == "deploy" {
			out = append(out, c)
		}
	}
	return out
}

func overridesOf(cmd []string) map[string]string {
	m := map[string]string{}
	for i, a := range cmd {
		if a != "--parameter-overrides" {
			continue
		}
		for _, kv := range cmd[i+1:] {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	}
	return m
}

func args(t *testing.T, extra ...string) []string {
	t.Helper()
	return append([]string{"-template", "../../template.yaml", "-state", t.TempDir(), "-venv", "/venv"}, extra...)
}

// firstRunAnswers answer the guided questions in order: Stage (default),
// issuer, JWKS, no ResourceUrl, the two providers, the Risk key's name, the
// default Release key name, the task id key's name, then defaults for the
// KMS key, grants, alarm topic, gateway mode, audience, scope.
const firstRunAnswers = "\nhttps://auth.example.com/\nhttps://auth.example.com/jwks.json\n\nhttps://risk.example.com\nhttps://release.example.com\n" +
	"/intentgate/test/risk-key\n\n/intentgate/test/task-id-key\n\n\n\n\n\n\n"

func TestFirstGuidedDeployFindsItsEndpointAndRemembersTheAnswers(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, endpoint: "https://abc123.execute-api.eu-west-1.amazonaws.com/mcp"}
	a := args(t, "-stack", "ig-test", "-region", "eu-west-1")
	require.NoError(t, run(context.Background(), a, strings.NewReader(firstRunAnswers), io.Discard, aws))

	deploys := aws.deploys()
	require.Len(t, deploys, 2, "a placeholder deploy, then one with the API's own URL")
	first, second := overridesOf(deploys[0]), overridesOf(deploys[1])
	assert.Equal(t, placeholderResourceURL, first["ResourceUrl"])
	assert.Equal(t, aws.endpoint, second["ResourceUrl"])
	assert.Equal(t, "https://auth.example.com/", second["TokenIssuer"])
	assert.Equal(t, "https://risk.example.com", second["RiskApiUrl"])
	assert.Equal(t, "10", second["McpReservedConcurrency"])
	assert.Equal(t, "/intentgate/test/risk-key", second["RiskApiKeyParameterName"], "the secrets' parameter names are asked")
	assert.Equal(t, "/intentgate/dev/release-api-key", second["ReleaseApiKeyParameterName"], "the template default is offered")
	assert.Equal(t, "/intentgate/test/task-id-key", second["TaskIdKeyParameterName"], "the task id key's parameter is asked (MCP Tasks on Lambda)")
	assert.NotContains(t, second, "AlarmTopicArn", "empty answers leave the template default")
	assert.Contains(t, deploys[1], "--confirm-changeset")
	assert.Equal(t, []string{"/venv/bin/sam", "deploy", "--stack-name", "ig-test", "--region", "eu-west-1"}, deploys[1][:6])

	// The second run asks nothing (stdin is empty) and deploys once.
	aws2 := &fakeAWS{facts: aws.facts}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws2))
	require.Len(t, aws2.deploys(), 1)
	assert.Equal(t, second, overridesOf(aws2.deploys()[0]))
}

func TestDeployRefusesPlainHTTPAnswersUntilCorrected(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp"}
	in := "\nhttp://auth.example.com/\nhttps://auth.example.com/\nhttps://auth.example.com/jwks.json\nhttps://mcp.example.com/mcp\nhttps://risk.example.com\nhttps://release.example.com\n\n\n\n\n\n\n\n\n\n"
	var out strings.Builder
	require.NoError(t, run(context.Background(), args(t), strings.NewReader(in), &out, aws))
	assert.Contains(t, out.String(), `TokenIssuer="http://auth.example.com/" does not match`)
	require.Len(t, aws.deploys(), 1, "a ResourceUrl was given: one deploy")
	assert.Equal(t, "https://auth.example.com/", overridesOf(aws.deploys()[0])["TokenIssuer"])
}

func TestDeployWithoutAnswersAndWithoutATerminalSaysWhatIsMissing(t *testing.T) {
	aws := &fakeAWS{}
	err := run(context.Background(), args(t, "-yes"), strings.NewReader(""), io.Discard, aws)
	require.ErrorContains(t, err, "TokenIssuer is required")
	assert.Empty(t, aws.ran, "nothing was built or deployed")
}

func TestDeployChecksTheAccountConcurrencyBeforeDeploying(t *testing.T) {
	state := t.TempDir()
	a := []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv", "-yes"}
	answers := map[string]string{"TokenIssuer": "https://auth.example.com/", "JwksUrl": "https://auth.example.com/jwks.json",
		"ResourceUrl": "https://mcp.example.com/mcp", "RiskApiUrl": "https://risk.example.com", "ReleaseApiUrl": "https://release.example.com"}
	raw, err := json.Marshal(answers)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.json"), raw, 0o600))

	// A new account: limit 50, so 10 + 2 reserved would leave 38 < 100.
	small := &fakeAWS{facts: accountFacts{Limit: 50, Unreserved: 50}}
	err = run(context.Background(), a, strings.NewReader(""), io.Discard, small)
	require.ErrorContains(t, err, "concurrency limit is 50")
	assert.Empty(t, small.deploys(), "refused before deploying")

	// Interactive, the deployer accepts deploying without reservations.
	interactive := []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv"}
	err = run(context.Background(), interactive, strings.NewReader("yes\n"), io.Discard, small)
	require.NoError(t, err)
	got := overridesOf(small.deploys()[0])
	assert.Equal(t, "0", got["McpReservedConcurrency"])
	assert.Equal(t, "0", got["ReconcilerReservedConcurrency"])

	// A redeploy counts the stack's own reservations as available.
	redeploy := &fakeAWS{facts: accountFacts{Limit: 112, Unreserved: 100, OursReserved: 12}}
	answers["McpReservedConcurrency"], answers["ReconcilerReservedConcurrency"] = "10", "2"
	raw, err = json.Marshal(answers)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.json"), raw, 0o600))
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, redeploy))
	assert.Equal(t, "10", overridesOf(redeploy.deploys()[0])["McpReservedConcurrency"])
}

func TestDeployArgumentsAreValidated(t *testing.T) {
	for _, bad := range [][]string{
		{"-stack", "1bad"}, {"-stack", "has_underscore"}, {"-region", "mars"}, {"-guided", "-yes"}, {"extra"}, {"-nope"},
	} {
		_, err := parseArgs(bad)
		assert.Error(t, err, "%v", bad)
	}
	o, err := parseArgs([]string{"-stack", "ig-prod", "-region", "eu-central-1"})
	require.NoError(t, err)
	assert.Equal(t, "ig-prod", o.stack)
}

func TestDestroyDeletesTheStackOnly(t *testing.T) {
	aws := &fakeAWS{}
	require.NoError(t, run(context.Background(), args(t, "-destroy", "-yes", "-stack", "ig-test"), strings.NewReader(""), io.Discard, aws))
	require.Len(t, aws.ran, 1)
	assert.Equal(t, []string{"/venv/bin/sam", "delete", "--stack-name", "ig-test", "--region", aws.ranRegion(), "--no-prompts"}, aws.ran[0])
}

func (f *fakeAWS) ranRegion() string { return f.ran[0][5] }
