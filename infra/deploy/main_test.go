package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// fakeAWS records the commands deploy runs and answers the account and
// stack-output queries as a real account would. Its sam build writes what
// the real one does: the template (edited by edit, when set) in the long
// form (Ref:, Fn::If:) without comments, each CodeUri turned into the
// function's build directory, and a bootstrap per function (code, or "v1";
// codeOf overrides it per function).
//
// The stack exists (describe_stacks answers endpoint and the ResourceUrl
// of its last applied deploy) once a deploy applied, or from the start
// when existing is set (deployed with existingURL, else endpoint);
// failDeploy fails the n-th deploy (1-based) and declineDeploy has the
// n-th one's change set declined (sam then exits 0 having changed nothing). web answers GETs (URL to status and body); any other URL is
// out of reach, as the network is in tests.
type fakeAWS struct {
	facts         accountFacts
	ssm           map[string]ssmParameter // the SecureStrings' metadata; nil: DescribeParameters refused
	status        string                  // the stack's status when it exists (default CREATE_COMPLETE / UPDATE_COMPLETE)
	endpoint      string
	existing      bool
	existingURL   string
	existingStage string // the deployed stack's Stage (default: none recorded)
	failDeploy    int
	declineDeploy int
	leftTable     string            // a table of the stack's name left by an earlier stack (answered while no stack exists)
	stages        map[string]string // other intentgate stacks in the region: name to Stage
	applied       []map[string]string
	code          string
	codeOf        map[string]string
	edit          func(template string) string
	web           map[string]page
	ran           [][]string
}

type page struct {
	status int
	body   string
}

func (f *fakeAWS) available(string) error { return nil }

func (f *fakeAWS) fetch(_ context.Context, url string) (int, []byte, error) {
	p, ok := f.web[url]
	if !ok {
		return 0, nil, fmt.Errorf("dial %s: no network in tests", url)
	}
	return p.status, []byte(p.body), nil
}

var builtFunctions = map[string]string{"McpFunction": "functions/mcp", "ReconcilerFunction": "functions/reconciler"}

func (f *fakeAWS) run(_ context.Context, _ io.Writer, cmd ...string) error {
	f.ran = append(f.ran, cmd)
	if len(cmd) > 1 && cmd[1] == "deploy" {
		switch len(f.deploys()) {
		case f.failDeploy:
			return fmt.Errorf("the change set failed")
		case f.declineDeploy:
			return nil
		}
		f.applied = append(f.applied, overridesOf(cmd))
	}
	if len(cmd) < 2 || cmd[1] != "build" {
		return nil
	}
	dir := cmd[slices.Index(cmd, "--build-dir")+1]
	raw, err := os.ReadFile(cmd[slices.Index(cmd, "--template-file")+1])
	if err != nil {
		return err
	}
	tpl := string(raw)
	for fn, src := range builtFunctions {
		tpl = strings.Replace(tpl, "CodeUri: "+src+"\n", "CodeUri: "+fn+"\n", 1)
		code := f.code
		if code == "" {
			code = "v1"
		}
		if c, ok := f.codeOf[fn]; ok {
			code = c
		}
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte(code), 0o755); err != nil {
			return err
		}
	}
	if f.edit != nil {
		tpl = f.edit(tpl)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(tpl), &doc); err != nil {
		return err
	}
	longForm(&doc)
	built, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "template.yaml"), built, 0o644)
}

// longForm rewrites short-form intrinsics (!Ref X) as sam build writes
// them (Ref: X) and drops comments.
func longForm(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		longForm(c)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return
	}
	name := strings.TrimPrefix(n.Tag, "!")
	if name != "Ref" && name != "Condition" {
		name = "Fn::" + name
	}
	arg := *n
	arg.Tag = ""
	arg.Style = 0
	if name == "Fn::GetAtt" && arg.Kind == yaml.ScalarNode {
		res, attr, _ := strings.Cut(arg.Value, ".")
		arg = yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: res}, {Kind: yaml.ScalarNode, Value: attr}}}
	}
	if arg.Kind == yaml.ScalarNode {
		arg.Tag = "!!str"
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: name}, &arg}}
}

func (f *fakeAWS) output(_ context.Context, cmd ...string) ([]byte, error) {
	f.ran = append(f.ran, cmd)
	switch {
	case strings.Contains(cmd[2], "stages_in_use"):
		return json.Marshal(stageFacts{Stages: f.stages})
	case strings.Contains(cmd[2], "get_account_settings"):
		return json.Marshal(f.facts)
	case strings.Contains(cmd[2], "describe_parameters"):
		if f.ssm == nil {
			return json.Marshal(ssmFacts{Unchecked: "AccessDeniedException: not authorized to perform ssm:DescribeParameters"})
		}
		found := map[string]ssmParameter{}
		for _, name := range cmd[4:] {
			if p, ok := f.ssm[name]; ok {
				found[name] = p
			}
		}
		return json.Marshal(ssmFacts{Parameters: found})
	case strings.Contains(cmd[2], "describe_stacks"):
		status := f.status
		if status == "" {
			status = "UPDATE_COMPLETE"
		}
		switch {
		case len(f.applied) > 0:
			return json.Marshal(stackState{Endpoint: f.endpoint, ResourceURL: f.applied[len(f.applied)-1]["ResourceUrl"], Status: status})
		case f.existing:
			url := f.existingURL
			if url == "" {
				url = f.endpoint
			}
			return json.Marshal(stackState{Endpoint: f.endpoint, ResourceURL: url, Status: status, Stage: f.existingStage})
		}
		if f.leftTable != "" {
			return json.Marshal(stackState{LeftTable: f.leftTable})
		}
		return []byte("{}\n"), nil // no stack yet
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

// overridesOf reads --parameter-overrides back as sam deploy does: Key="value".
func overridesOf(cmd []string) map[string]string {
	m := map[string]string{}
	for i, a := range cmd {
		if a != "--parameter-overrides" {
			continue
		}
		for _, kv := range cmd[i+1:] {
			k, v, _ := strings.Cut(kv, "=")
			if _, twice := m[k]; twice {
				panic("override given twice: " + k)
			}
			if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
				panic("unquoted override " + kv)
			}
			m[k] = v[1 : len(v)-1]
		}
	}
	return m
}

func args(t *testing.T, extra ...string) []string {
	t.Helper()
	return append([]string{"-template", "../../template.yaml", "-state", t.TempDir(), "-venv", "/venv", "-build-dir", t.TempDir()}, extra...)
}

// TestMain keeps the developer's own AWS settings out of the tests: a
// region or profile there would change the region every test without
// -region deploys to.
func TestMain(m *testing.M) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"} {
		os.Unsetenv(k)
	}
	os.Setenv("AWS_CONFIG_FILE", os.DevNull)
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	servingRetryWait = 0 // the fake API answers at once
	os.Exit(m.Run())
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
	assert.Equal(t, "", second["AlarmTopicArn"], "an empty answer is passed empty (the template default)")
	assert.NotEqual(t, first["McpFunctionRevision"], second["McpFunctionRevision"], "the real ResourceUrl publishes a new MCP version")
	assert.Equal(t, first["ReconcilerFunctionRevision"], second["ReconcilerFunctionRevision"], "the reconciler does not use ResourceUrl")
	assert.Equal(t, "Canary10Percent5Minutes", first["DeploymentType"])
	assert.Equal(t, "AllAtOnce", second["DeploymentType"], "away from a version that refuses every real token at once")
	assert.Contains(t, deploys[1], "--confirm-changeset")
	assert.Equal(t, []string{"/venv/bin/sam", "deploy", "--config-file"}, deploys[1][:3])
	assert.Equal(t, []string{"--stack-name", "ig-test", "--region", "eu-west-1"}, deploys[1][6:10])

	// The second run asks nothing (stdin is empty), reads the endpoint from
	// the stack again (it is not an answer) and deploys once, by the
	// remembered deployment type.
	aws2 := &fakeAWS{facts: aws.facts, endpoint: aws.endpoint, existing: true}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws2))
	require.Len(t, aws2.deploys(), 1)
	again := overridesOf(aws2.deploys()[0])
	assert.Equal(t, "Canary10Percent5Minutes", again["DeploymentType"])
	delete(again, "DeploymentType")
	delete(second, "DeploymentType")
	assert.Equal(t, second, again, "and the same revisions: the deployment type is not part of a version")
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
	a := []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv", "-build-dir", t.TempDir(), "-yes"}
	answers := map[string]string{"TokenIssuer": "https://auth.example.com/", "JwksUrl": "https://auth.example.com/jwks.json",
		"ResourceUrl": "https://mcp.example.com/mcp", "RiskApiUrl": "https://risk.example.com", "ReleaseApiUrl": "https://release.example.com"}
	raw, err := json.Marshal(answers)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.json"), raw, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.region"), []byte("us-east-1\n"), 0o600))

	// A new account: limit 50, so 10 + 2 reserved would leave 38 < 100.
	small := &fakeAWS{facts: accountFacts{Limit: 50, Unreserved: 50}}
	err = run(context.Background(), a, strings.NewReader(""), io.Discard, small)
	require.ErrorContains(t, err, "concurrency limit is 50")
	assert.Empty(t, small.deploys(), "refused before deploying")

	// Interactive, the deployer accepts deploying without reservations.
	interactive := []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv", "-build-dir", t.TempDir()}
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
		{"-stack", "s" + strings.Repeat("x", 53)}, // <stack>-reconciler would pass Lambda's 64
	} {
		_, err := parseArgs(context.Background(), bad)
		assert.Error(t, err, "%v", bad)
	}
	o, err := parseArgs(context.Background(), []string{"-stack", "ig-prod", "-region", "eu-central-1"})
	require.NoError(t, err)
	assert.Equal(t, "ig-prod", o.stack)
	_, err = parseArgs(context.Background(), []string{"-stack", "s" + strings.Repeat("x", 52)})
	assert.NoError(t, err, "53 characters fit")
}

func TestDestroyDeletesTheStackOnly(t *testing.T) {
	aws := &fakeAWS{existing: true, endpoint: "https://x.execute-api.eu-west-1.amazonaws.com/mcp"}
	var out strings.Builder
	require.NoError(t, run(context.Background(), args(t, "-destroy", "-yes", "-stack", "ig-test", "-region", "eu-west-1"), strings.NewReader(""), &out, aws))
	require.Len(t, aws.ran, 3, "the stack is looked up, deleted, and looked up again")
	del := aws.ran[1]
	assert.Equal(t, []string{"/venv/bin/sam", "delete"}, del[:2])
	assert.Equal(t, []string{"--stack-name", "ig-test", "--region", "eu-west-1", "--no-prompts"}, del[4:])
	for _, says := range []string{"log groups", "audit records", "operations table is retained"} {
		assert.Contains(t, out.String(), says, "the destroy says what goes and what stays")
	}
}

// rememberedAnswers writes an answers file for a -yes deploy and returns its
// arguments.
func rememberedAnswers(t *testing.T, extra map[string]string) []string {
	t.Helper()
	state := t.TempDir()
	answers := map[string]string{"TokenIssuer": "https://auth.example.com/", "JwksUrl": "https://auth.example.com/jwks.json",
		"ResourceUrl": "https://mcp.example.com/mcp", "RiskApiUrl": "https://risk.example.com", "ReleaseApiUrl": "https://release.example.com"}
	for k, v := range extra {
		answers[k] = v
	}
	raw, err := json.Marshal(answers)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.json"), raw, 0o600))
	// Written with the answers, as every run since regions are remembered.
	require.NoError(t, os.WriteFile(filepath.Join(state, "intentgate-dev.region"), []byte("us-east-1\n"), 0o600))
	return []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv", "-build-dir", t.TempDir(), "-yes"}
}

// A new account (limit 50) deploys without reservations and without being
// asked again: there is nothing to fit.
func TestDeployWithoutReservationsNeedsNoConcurrencyHeadroom(t *testing.T) {
	a := rememberedAnswers(t, map[string]string{"McpReservedConcurrency": "0", "ReconcilerReservedConcurrency": "0"})
	small := &fakeAWS{facts: accountFacts{Limit: 50, Unreserved: 50}}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, small))
	require.Len(t, small.deploys(), 1)
}

// Given a revision, SAM names a version after it alone, so each deploy
// names each function's version (<Function>Revision) after its built code,
// its properties and Globals, and the parameter values those use: new code,
// a template change or a new answer publishes a new version of the
// functions it touches and of no other; the same deploy again, or a change
// only to how versions are deployed or watched, publishes none.
func TestEveryDeployNamesEachVersionAfterWhatMakesIt(t *testing.T) {
	facts := accountFacts{Limit: 1000, Unreserved: 1000}
	revisions := func(a []string, aws *fakeAWS) map[string]string {
		t.Helper()
		if aws.facts == (accountFacts{}) {
			aws.facts = facts
		}
		require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws))
		deploys := aws.deploys()
		got := overridesOf(deploys[len(deploys)-1])
		out := map[string]string{}
		for _, fn := range []string{"McpFunction", "ReconcilerFunction"} {
			out[fn] = got[fn+"Revision"]
			assert.Regexp(t, `^[0-9a-f]{64}$`, out[fn], "the template's revision pattern")
		}
		return out
	}
	a := rememberedAnswers(t, nil)
	base := revisions(a, &fakeAWS{})
	assert.NotEqual(t, base["McpFunction"], base["ReconcilerFunction"])
	assert.Equal(t, base, revisions(a, &fakeAWS{}), "nothing changed: no new version")

	both := func(t *testing.T, got map[string]string, why string) {
		t.Helper()
		assert.NotEqual(t, base["McpFunction"], got["McpFunction"], why)
		assert.NotEqual(t, base["ReconcilerFunction"], got["ReconcilerFunction"], why)
	}
	mcpOnly := func(t *testing.T, got map[string]string, why string) {
		t.Helper()
		assert.NotEqual(t, base["McpFunction"], got["McpFunction"], why)
		assert.Equal(t, base["ReconcilerFunction"], got["ReconcilerFunction"], why)
	}
	none := func(t *testing.T, got map[string]string, why string) {
		t.Helper()
		assert.Equal(t, base, got, why)
	}
	both(t, revisions(a, &fakeAWS{code: "v2"}), "new code in both")
	mcpOnly(t, revisions(a, &fakeAWS{codeOf: map[string]string{"McpFunction": "v2"}}), "new MCP code")
	both(t, revisions(rememberedAnswers(t, map[string]string{"LogLevel": "DEBUG"}), &fakeAWS{}), "a Globals setting's parameter")
	mcpOnly(t, revisions(rememberedAnswers(t, map[string]string{"ResourceUrl": "https://mcp2.example.com/mcp"}), &fakeAWS{}), "a parameter only the MCP function uses")
	mcpOnly(t, revisions(rememberedAnswers(t, map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "s"}), &fakeAWS{}),
		"a parameter the MCP function uses through a condition")
	none(t, revisions(rememberedAnswers(t, map[string]string{"McpReservedConcurrency": "0"}), &fakeAWS{}), "a reservation is not part of a version")
	none(t, revisions(rememberedAnswers(t, map[string]string{"DeploymentType": "AllAtOnce"}), &fakeAWS{}), "how versions are deployed")
	none(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "Schedule: rate(1 minute)", "Schedule: rate(2 minutes)", 1)
	}}), "what invokes a version")
	mcpOnly(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, `HasTaskIdKey: !Not [!Equals [!Ref TaskIdKeyParameterName, ""]]`, `HasTaskIdKey: !Equals [!Ref TaskIdKeyParameterName, ""]`, 1)
	}}), "an edited condition the MCP function uses")
	mcpOnly(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "LogGroupName: !Sub /aws/lambda/${AWS::StackName}-mcp", "LogGroupName: !Sub /aws/lambda/${AWS::StackName}-mcp-logs", 1)
	}}), "a resource the MCP function names, replaced")
	none(t, revisions(rememberedAnswers(t, map[string]string{"UnknownAgeAlarmMinutes": "30"}), &fakeAWS{}), "an alarm threshold")
	both(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "    MemorySize: 256\n", "    MemorySize: 512\n", 1)
	}}), "a template change to Globals")
	mcpOnly(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "          INTENTGATE_MAX_QUEUE: \"0\"\n", "          INTENTGATE_MAX_QUEUE: \"1\"\n", 1)
	}}), "a template change to the MCP function's environment")

	mcpOnly(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		// A Path replaces the role: its new ARN must reach a new version.
		return strings.Replace(tpl, "  McpFunctionRole:\n    Type: AWS::IAM::Role\n    Properties:\n", "  McpFunctionRole:\n    Type: AWS::IAM::Role\n    Properties:\n      Path: /intentgate/\n", 1)
	}}), "the role the MCP function names (GetAtt), replaced")
	none(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "MaximumEventAgeInSeconds: 120", "MaximumEventAgeInSeconds: 180", 1)
	}}), "the alias's async settings")
	none(t, revisions(a, &fakeAWS{edit: func(tpl string) string {
		return strings.Replace(tpl, "    Tags:\n", "    Tags:\n      team: payments\n", 1)
	}}), "tags")

	// A rotated SSM value reaches only new instances: -republish publishes
	// versions of the same code and answers, new every time, and the
	// deploys after it publish nothing more.
	once := revisions(append(a, "-republish"), &fakeAWS{})
	both(t, once, "-republish")
	assert.Equal(t, once, revisions(a, &fakeAWS{}), "the deploy after a -republish")
	twice := revisions(append(a, "-republish"), &fakeAWS{})
	assert.NotEqual(t, once, twice)
	assert.Equal(t, twice, revisions(a, &fakeAWS{}))
	// A -republish whose deploy failed is not remembered.
	require.Error(t, run(context.Background(), append(a, "-republish"), strings.NewReader(""), io.Discard, &fakeAWS{facts: facts, failDeploy: 1}))
	assert.Equal(t, twice, revisions(a, &fakeAWS{}))
}

// A revision can not follow a value the template does not show: a function
// property taken from a mapping, another stack's export or a dynamic
// reference stops the deploy before anything is deployed.
func TestAFunctionPropertyARevisionCannotFollowIsRefused(t *testing.T) {
	for _, value := range []string{
		`!FindInMap [Sizes, !Ref Stage, Memory]`,
		`!ImportValue shared-table-name`,
		`"{{resolve:ssm:/intentgate/table}}"`,
	} {
		aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, edit: func(tpl string) string {
			return strings.Replace(tpl, "        INTENTGATE_STAGE: !Ref Stage\n", "        INTENTGATE_STAGE: "+value+"\n", 1)
		}}
		err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws)
		require.ErrorContains(t, err, "a revision can not follow", value)
		assert.Empty(t, aws.deploys(), value)
	}
}

// On an update sam deploy keeps the previous value of a parameter it is not
// given, so an answer cleared (in the file, or with "-" when guided) is
// passed empty rather than left out.
func TestAClearedAnswerIsPassedEmpty(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}}
	a := rememberedAnswers(t, map[string]string{"AlarmTopicArn": ""})
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws))
	got := overridesOf(aws.deploys()[0])
	v, ok := got["AlarmTopicArn"]
	assert.True(t, ok && v == "", "AlarmTopicArn passed empty: %v", got)

	// Guided: the topic is remembered, and "-" clears it.
	aws = &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, endpoint: "https://abc.execute-api.us-east-1.amazonaws.com/mcp"}
	state := t.TempDir()
	guided := []string{"-template", "../../template.yaml", "-state", state, "-venv", "/venv", "-build-dir", t.TempDir()}
	withTopic := strings.Replace(firstRunAnswers, "/intentgate/test/task-id-key\n\n\n\n", "/intentgate/test/task-id-key\n\n\narn:aws:sns:us-east-1:123456789012:oncall\n", 1)
	require.NoError(t, run(context.Background(), guided, strings.NewReader(withTopic), io.Discard, aws))
	assert.Equal(t, "arn:aws:sns:us-east-1:123456789012:oncall", overridesOf(aws.deploys()[1])["AlarmTopicArn"])
	cleared := strings.Repeat("\n", 11) + "-\n" + strings.Repeat("\n", 5) // the 12th question is the topic; -guided asks the reservations last
	again := &fakeAWS{facts: aws.facts, endpoint: aws.endpoint, existing: true}
	require.NoError(t, run(context.Background(), append(guided, "-guided"), strings.NewReader(cleared), io.Discard, again))
	assert.Equal(t, "", overridesOf(again.deploys()[0])["AlarmTopicArn"])
}

// sam deploy's override parser cuts an unquoted value at its first space and
// turns \" into ": values go quoted, and a value it would mangle is refused
// before anything is built.
func TestAnswersReachSamDeployWhole(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}}
	a := rememberedAnswers(t, map[string]string{"OperatorName": "payments on-call", "DeployGrants": "team-a=svc1,svc2;team-b=svc3"})
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws))
	cmd := aws.deploys()[0]
	assert.Contains(t, cmd, `OperatorName="payments on-call"`)
	assert.Contains(t, cmd, `DeployGrants="team-a=svc1,svc2;team-b=svc3"`)
	assert.Equal(t, "DELETE", cmd[slices.Index(cmd, "--on-failure")+1], "a failed first create leaves no stack that refuses the retry")

	bad := &fakeAWS{facts: aws.facts}
	err := run(context.Background(), rememberedAnswers(t, map[string]string{"OperatorName": `say "hi"`}), strings.NewReader(""), io.Discard, bad)
	require.ErrorContains(t, err, "quotes and backslashes")
	assert.Empty(t, bad.deploys())
}

// What a deploy leaves is the template and the answers, nothing older: every
// parameter is passed (its answer, or its template default), because on an
// update sam deploy keeps the previous value of one it is not given; the
// first deploy's AllAtOnce, a samconfig.toml value or a console change would
// otherwise outlive every later deploy.
func TestEveryDeployPassesEveryParameter(t *testing.T) {
	params, err := loadParameters("../../template.yaml")
	require.NoError(t, err)
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws))
	got := overridesOf(aws.deploys()[0])
	for name, p := range params {
		require.Contains(t, got, name)
		if p.Default != nil && !strings.HasSuffix(name, revisionSuffix) {
			assert.Equal(t, *p.Default, got[name], name)
		}
	}
	assert.Len(t, got, len(params))
}

// "-" empties only an answer whose parameter may be empty: Stage may not,
// so it is refused and asked again, and its prompt does not offer it.
func TestAnAnswerThatMayNotBeEmptyCannotBeCleared(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, endpoint: "https://abc.execute-api.us-east-1.amazonaws.com/mcp"}
	var out strings.Builder
	require.NoError(t, run(context.Background(), args(t), strings.NewReader("-\nprod\n"+strings.TrimPrefix(firstRunAnswers, "\n")), &out, aws))
	assert.Contains(t, out.String(), `Stage="" does not match`)
	assert.NotContains(t, out.String(), "Environment name ("+clearAnswer+" for none)")
	assert.Contains(t, out.String(), "SNS topic ARN for alarms (empty: none) [")
	assert.Equal(t, "prod", overridesOf(aws.deploys()[0])["Stage"])
}

// Without a ResourceUrl answer the endpoint is the stack's, read on every
// run and never remembered as an answer (a stack created anew gets its
// own). Whenever the stack still serves the placeholder audience (a second
// pass that failed or whose change set was declined), the next run shifts
// to the endpoint all at once; a stack already on its endpoint is deployed
// by the remembered deployment type; no stack (a failed create deleted it)
// starts over with the placeholder.
func TestWithoutAResourceUrlTheEndpointIsTheStacks(t *testing.T) {
	endpoint := "https://abc.execute-api.us-east-1.amazonaws.com/mcp"
	facts := accountFacts{Limit: 1000, Unreserved: 1000}
	a := rememberedAnswers(t, map[string]string{"ResourceUrl": ""})
	remembered := func() string {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(a[slices.Index(a, "-state")+1], "intentgate-dev.json"))
		require.NoError(t, err)
		var answers map[string]string
		require.NoError(t, json.Unmarshal(raw, &answers))
		return answers["ResourceUrl"]
	}

	secondPassFails := &fakeAWS{facts: facts, endpoint: endpoint, failDeploy: 2}
	require.ErrorContains(t, run(context.Background(), a, strings.NewReader(""), io.Discard, secondPassFails), "sam deploy with ResourceUrl")
	for name, stack := range map[string]*fakeAWS{
		"second pass failed":   {facts: facts, endpoint: endpoint, existing: true, existingURL: placeholderResourceURL},
		"second pass declined": {facts: facts, endpoint: endpoint, declineDeploy: 2},
	} {
		if name == "second pass declined" {
			require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, stack), "sam exits 0 on a declined change set")
			require.Len(t, stack.applied, 1)
			stack = &fakeAWS{facts: facts, endpoint: endpoint, existing: true, existingURL: stack.applied[0]["ResourceUrl"]}
		}
		require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, stack), name)
		require.Len(t, stack.deploys(), 1, "%s: the stack's endpoint, no placeholder", name)
		got := overridesOf(stack.deploys()[0])
		assert.Equal(t, endpoint, got["ResourceUrl"], name)
		assert.Equal(t, "AllAtOnce", got["DeploymentType"], "%s: away from the placeholder at once", name)
	}
	assert.Equal(t, "", remembered(), "the endpoint is the stack's, not an answer")

	onEndpoint := &fakeAWS{facts: facts, endpoint: endpoint, existing: true}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, onEndpoint))
	require.Len(t, onEndpoint.deploys(), 1)
	assert.Equal(t, "Canary10Percent5Minutes", overridesOf(onEndpoint.deploys()[0])["DeploymentType"])

	noStack := &fakeAWS{facts: facts, endpoint: endpoint}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, noStack))
	deploys := noStack.deploys()
	require.Len(t, deploys, 2)
	assert.Equal(t, placeholderResourceURL, overridesOf(deploys[0])["ResourceUrl"])
	assert.Equal(t, endpoint, overridesOf(deploys[1])["ResourceUrl"])

	declinedCreate := &fakeAWS{facts: facts, endpoint: endpoint, declineDeploy: 1}
	require.ErrorContains(t, run(context.Background(), a, strings.NewReader(""), io.Discard, declinedCreate), "was its change set declined?")
}

// sam deploy's override parser tries ParameterKey=...,ParameterValue=...
// across a whole argument first: such a value would set another parameter
// and drop its own.
func TestAValueThatSamWouldReadAsAnotherParameterIsRefused(t *testing.T) {
	bad := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}}
	err := run(context.Background(), rememberedAnswers(t, map[string]string{"OperatorName": "x ParameterKey=Stage,ParameterValue=prod"}), strings.NewReader(""), io.Discard, bad)
	require.ErrorContains(t, err, "another parameter")
	assert.Empty(t, bad.deploys())
}

// In gateway mode API Gateway's JWT authorizer finds the issuer's keys
// through its discovery document and verifies RSA only: an issuer without
// the document, or without an RSA signing key, is refused before anything
// is built; one this machine can not read is reported and deployed.
func TestGatewayModeChecksTheIssuerTheAuthorizerWillUse(t *testing.T) {
	const issuer = "https://auth.example.com/"
	const discovery = "https://auth.example.com/.well-known/openid-configuration"
	const jwks = "https://auth.example.com/jwks.json"
	gateway := map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "intentgate/mcp"}
	rsaKeys := `{"keys":[{"kty":"RSA","use":"sig","kid":"r1","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}]}`
	ecKeys := `{"keys":[{"kty":"EC","use":"sig","kid":"e1","alg":"ES256","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	doc := `{"issuer":"` + issuer + `","jwks_uri":"` + jwks + `"}`
	facts := accountFacts{Limit: 1000, Unreserved: 1000}

	ok := &fakeAWS{facts: facts, web: map[string]page{discovery: {200, doc}, jwks: {200, rsaKeys}}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, gateway), strings.NewReader(""), io.Discard, ok))
	require.Len(t, ok.deploys(), 1)

	for name, web := range map[string]map[string]page{
		"ES256 only":          {discovery: {200, doc}, jwks: {200, ecKeys}},
		"RSA for encryption":  {discovery: {200, doc}, jwks: {200, strings.Replace(rsaKeys, `"use":"sig"`, `"use":"enc"`, 1)}},
		"no discovery":        {discovery: {404, "not found"}},
		"no jwks_uri":         {discovery: {200, `{"issuer":"` + issuer + `"}`}},
		"jwks_uri not https":  {discovery: {200, `{"issuer":"` + issuer + `","jwks_uri":"http://auth.example.com/jwks.json"}`}},
		"keys gone":           {discovery: {200, doc}, jwks: {410, ""}},
		"keys not a key set":  {discovery: {200, doc}, jwks: {200, "<html>"}},
		"discovery too large": {discovery: {200, strings.Repeat(" ", maxIssuerDocument+1)}},
	} {
		refused := &fakeAWS{facts: facts, web: web}
		err := run(context.Background(), rememberedAnswers(t, gateway), strings.NewReader(""), io.Discard, refused)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "GatewayJwtAuthorizer", name)
		assert.Empty(t, refused.ran, "%s: refused before anything ran", name)
	}

	// What says nothing about the issuer is reported and deployed: no
	// answer, a redirect, a refusal of this client, a server error.
	for name, web := range map[string]map[string]page{
		"unreachable":           nil,
		"discovery redirected":  {discovery: {302, ""}},
		"this client forbidden": {discovery: {403, ""}},
		"keys server error":     {discovery: {200, doc}, jwks: {500, ""}},
	} {
		reported := &fakeAWS{facts: facts, web: web}
		var out strings.Builder
		require.NoError(t, run(context.Background(), rememberedAnswers(t, gateway), strings.NewReader(""), &out, reported), name)
		assert.Contains(t, out.String(), "Could not check the issuer from here", name)
		require.Len(t, reported.deploys(), 1, name)
	}

	// The server verifying tokens takes ES256 as well: nothing is checked.
	tokenMode := &fakeAWS{facts: facts, web: map[string]page{discovery: {200, doc}, jwks: {200, ecKeys}}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, tokenMode))
}

// What a function's property refers to, in the long form sam build writes
// and in the short one: Ref, GetAtt (either form), the variables of Sub
// (with a map of its own), and the conditions of If, followed through the
// conditions they name.
func TestReferencesAreFollowedThroughEveryIntrinsic(t *testing.T) {
	const props = `
A: {Ref: P1}
B: {"Fn::GetAtt": [Role, Arn]}
C: !GetAtt Log.Arn
D: {"Fn::Sub": ["${X}-${Queue.Arn}-${!Literal}", {X: {Ref: P2}}]}
E: !Sub "${P3}"
F: {"Fn::If": [C1, x, y]}
`
	const conds = `
C1: {"Fn::And": [{Condition: C2}, {"Fn::Equals": [{Ref: P4}, "a"]}]}
C2: !Not [!Equals [!Ref P5, ""]]
`
	var p, c yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(props), &p))
	require.NoError(t, yaml.Unmarshal([]byte(conds), &c))
	refs := references{names: map[string]bool{}, conditions: map[string]bool{}}
	require.NoError(t, refs.collect(p.Content[0], c.Content[0]))
	assert.Equal(t, []string{"Log", "P1", "P2", "P3", "P4", "P5", "Queue", "Role", "X"}, slices.Sorted(maps.Keys(refs.names)))
	assert.Equal(t, []string{"C1", "C2"}, slices.Sorted(maps.Keys(refs.conditions)))
}

// An answer longer than its parameter's MaxLength is refused before
// anything is built, as CloudFormation would refuse it after the build and
// the upload; the template's own parameters are the rule.
func TestAnAnswerLongerThanItsParameterAllowsIsRefusedBeforeTheBuild(t *testing.T) {
	params, err := loadParameters("../../template.yaml")
	require.NoError(t, err)
	p, ok := params["OperatorName"]
	require.True(t, ok)
	require.NotNil(t, p.MaxLength, "template.yaml bounds OperatorName")
	assert.NoError(t, p.validate("OperatorName", strings.Repeat("o", *p.MaxLength)))
	err = p.validate("OperatorName", strings.Repeat("o", *p.MaxLength+1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("at most %d characters", *p.MaxLength))
}

// The shared alarms (escalations, the auth alarm, stream failures) count
// the old version too: while it sets them off, a canary of its fix would
// be rolled back to it. -fix-forward deploys once with the new version's
// own errors as the only rollback trigger; the next deploy has them all
// again, since the choice is never remembered.
func TestAFixForwardDeployIsRolledBackOnlyByTheNewVersionsOwnErrorsOnce(t *testing.T) {
	aws := &fakeAWS{facts: accountFacts{Limit: 1000, Unreserved: 1000}, endpoint: "https://abc123.execute-api.eu-west-1.amazonaws.com/mcp"}
	base := args(t, "-stack", "ig-fix")
	require.NoError(t, run(context.Background(), base, strings.NewReader(firstRunAnswers), io.Discard, aws))
	for _, d := range aws.deploys() {
		assert.Equal(t, "All", overridesOf(d)["RollbackAlarms"], "every alarm rolls back by default")
	}

	fix := &fakeAWS{facts: aws.facts, endpoint: aws.endpoint, existing: true}
	require.NoError(t, run(context.Background(), append(slices.Clone(base), "-fix-forward"), strings.NewReader(""), io.Discard, fix))
	require.Len(t, fix.deploys(), 1)
	fixed := overridesOf(fix.deploys()[0])
	assert.Equal(t, "NewVersionErrors", fixed["RollbackAlarms"])

	after := &fakeAWS{facts: aws.facts, endpoint: aws.endpoint, existing: true}
	require.NoError(t, run(context.Background(), base, strings.NewReader(""), io.Discard, after))
	require.Len(t, after.deploys(), 1)
	next := overridesOf(after.deploys()[0])
	assert.Equal(t, "All", next["RollbackAlarms"], "passed again: sam deploy would keep the fix-forward's value")
	delete(fixed, "RollbackAlarms")
	delete(next, "RollbackAlarms")
	assert.Equal(t, fixed, next, "and nothing else differs: the rollback alarms are not part of a version")
}
