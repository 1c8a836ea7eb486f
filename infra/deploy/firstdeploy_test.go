package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var roomy = accountFacts{Limit: 1000, Unreserved: 1000}

// A stack CloudFormation will not update (a first create killed before
// sam could delete it, one still changing, a rollback that failed) is
// reported with what to do, before anything is built or sent.
func TestADeployStopsBeforeBuildingWhenTheStackCannotBeUpdated(t *testing.T) {
	for status, says := range map[string]string{
		"ROLLBACK_COMPLETE":      "make destroy",
		"ROLLBACK_FAILED":        "make destroy",
		"DELETE_FAILED":          "make destroy",
		"CREATE_IN_PROGRESS":     "wait",
		"UPDATE_IN_PROGRESS":     "wait",
		"DELETE_IN_PROGRESS":     "wait",
		"UPDATE_ROLLBACK_FAILED": "continue-update-rollback",
	} {
		t.Run(status, func(t *testing.T) {
			aws := &fakeAWS{facts: roomy, endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp", existing: true, status: status}
			err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws)
			require.ErrorContains(t, err, status)
			assert.ErrorContains(t, err, says)
			for _, c := range aws.ran {
				assert.NotContains(t, []string{"build", "deploy"}, c[1], "ran %v", c)
			}
		})
	}
	for _, status := range []string{"UPDATE_ROLLBACK_COMPLETE", "CREATE_COMPLETE", "IMPORT_COMPLETE"} {
		aws := &fakeAWS{facts: roomy, endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp", existing: true, status: status}
		require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws), status)
		assert.Len(t, aws.deploys(), 1, status)
	}
}

// The operations table outlives its stack (DeletionPolicy): a new stack of
// the same name would fail to create it ("already exists") after the build,
// the upload and half the resources, and roll everything back. A first
// deploy that finds it stops before building and says what to do.
func TestAFirstDeployStopsOnTheTableAnEarlierStackOfItsNameLeft(t *testing.T) {
	aws := &fakeAWS{facts: roomy, leftTable: "intentgate-dev-operations"}
	err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws)
	require.ErrorContains(t, err, "intentgate-dev-operations")
	assert.ErrorContains(t, err, "delete-table")
	assert.ErrorContains(t, err, "-stack")
	for _, c := range aws.ran {
		assert.NotContains(t, []string{"build", "deploy"}, c[1], "ran %v", c)
	}
}

// The functions publish their metrics under the Stage dimension alone, and
// each stack's alarms (some of them rollback triggers) read them there: two
// stacks of one Stage in one region would read each other's, and one's
// escalation would roll back the other's deploys. A deploy whose Stage
// another intentgate stack in the region uses stops before building; its
// own stack, and other Stages, do not count.
func TestADeployStopsOnAStageAnotherStackInTheRegionUses(t *testing.T) {
	aws := &fakeAWS{facts: roomy, stages: map[string]string{"intentgate-alice": "dev", "intentgate-prod": "prod"}}
	err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws)
	require.ErrorContains(t, err, "intentgate-alice")
	assert.ErrorContains(t, err, "Stage")
	for _, c := range aws.ran {
		assert.NotContains(t, []string{"build", "deploy"}, c[1], "ran %v", c)
	}

	for name, stages := range map[string]map[string]string{
		"its own stack":  {"intentgate-dev": "dev"},
		"other Stages":   {"intentgate-prod": "prod", "intentgate-staging": "staging"},
		"no other stack": nil,
	} {
		aws := &fakeAWS{facts: roomy, stages: stages}
		require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws), name)
		assert.Len(t, aws.deploys(), 1, name)
	}
	answered := &fakeAWS{facts: roomy, stages: map[string]string{"intentgate-alice": "dev"}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, map[string]string{"Stage": "bob"}), strings.NewReader(""), io.Discard, answered))
	assert.Equal(t, "bob", answered.applied[0]["Stage"])
}

// Two stacks that already share a Stage (both left at the default before
// the check existed) must still be deployable, or neither could be fixed
// nor moved to another Stage: an update that keeps a stack's own Stage is
// warned about, not stopped; moving it onto another stack's Stage still is.
func TestAStageTwoStacksAlreadyShareWarnsButDoesNotStopTheirUpdates(t *testing.T) {
	var out strings.Builder
	aws := &fakeAWS{facts: roomy, existing: true, existingStage: "dev", endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp",
		stages: map[string]string{"intentgate-alice": "dev"}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), &out, aws))
	assert.Len(t, aws.deploys(), 1, "the update runs")
	assert.Contains(t, out.String(), "intentgate-alice", "and says which stack shares its Stage")
	assert.Contains(t, out.String(), "Stage")

	moving := &fakeAWS{facts: roomy, existing: true, existingStage: "prod", endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp",
		stages: map[string]string{"intentgate-alice": "dev"}}
	err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, moving)
	require.ErrorContains(t, err, "intentgate-alice", "moving onto another stack's Stage is stopped")
}

// The functions refuse to start when the sweep would read fewer shards
// than the writers spread over (DueShardsSwept between 1 and DueShards-1),
// which no template parameter rule can say (Rules compare no numbers): the
// deploy refuses it before building, and takes 0 (= DueShards) or any
// count from DueShards up.
func TestADueShardsSweptBelowDueShardsIsRefusedBeforeTheBuild(t *testing.T) {
	aws := &fakeAWS{facts: roomy}
	err := run(context.Background(), rememberedAnswers(t, map[string]string{"DueShards": "32", "DueShardsSwept": "16"}), strings.NewReader(""), io.Discard, aws)
	require.ErrorContains(t, err, "DueShardsSwept")
	for _, c := range aws.ran {
		assert.NotContains(t, []string{"build", "deploy"}, c[1], "ran %v", c)
	}
	err = run(context.Background(), rememberedAnswers(t, map[string]string{"DueShardsSwept": "8"}), strings.NewReader(""), io.Discard, &fakeAWS{facts: roomy})
	require.ErrorContains(t, err, "DueShardsSwept", "below the template's default DueShards (16)")
	for _, swept := range []string{"0", "32", "64", "256"} {
		aws := &fakeAWS{facts: roomy}
		require.NoError(t, run(context.Background(), rememberedAnswers(t, map[string]string{"DueShards": "32", "DueShardsSwept": swept}), strings.NewReader(""), io.Discard, aws), swept)
		assert.Len(t, aws.deploys(), 1, swept)
	}
}

// A first create runs no PreTraffic check (CloudFormation applies no
// update policy to what it creates), so a deploy that created the stack
// asks the API for the protected resource metadata, which the MCP function
// serves only once its whole start (configuration, SecureStrings, the
// issuer's keys) succeeded: an error status fails the deploy and says
// where to look; an answer this machine can not get is reported only; an
// update (checked by its hooks) is not asked about.
func TestADeployThatCreatedTheStackChecksTheMCPFunctionServes(t *testing.T) {
	const endpoint = "https://abc.execute-api.us-east-1.amazonaws.com/mcp"
	const metadata = "https://abc.execute-api.us-east-1.amazonaws.com/.well-known/oauth-protected-resource"
	failing := &fakeAWS{facts: roomy, endpoint: endpoint, web: map[string]page{metadata: {502, `{"message":"Internal Server Error"}`}}}
	err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, failing)
	require.ErrorContains(t, err, "502")
	assert.ErrorContains(t, err, "/aws/lambda/intentgate-dev-mcp")
	assert.Len(t, failing.deploys(), 1)

	for name, aws := range map[string]*fakeAWS{
		"serving":     {facts: roomy, endpoint: endpoint, web: map[string]page{metadata: {200, `{"resource":"https://mcp.example.com/mcp"}`}}},
		"unreachable": {facts: roomy, endpoint: endpoint},
		"an update":   {facts: roomy, endpoint: endpoint, existing: true, web: map[string]page{metadata: {502, ""}}},
	} {
		var out strings.Builder
		require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), &out, aws), name)
		assert.Len(t, aws.deploys(), 1, name)
		if name == "unreachable" {
			assert.Contains(t, out.String(), metadata, "what could not be checked is said")
		}
	}

	// Without a ResourceUrl answer: checked once, after the second pass.
	twoPass := &fakeAWS{facts: roomy, endpoint: endpoint, web: map[string]page{metadata: {502, ""}}}
	err = run(context.Background(), rememberedAnswers(t, map[string]string{"ResourceUrl": ""}), strings.NewReader(""), io.Discard, twoPass)
	require.ErrorContains(t, err, "502")
	assert.Len(t, twoPass.deploys(), 2)
}

func regionOf(cmd []string) string { return cmd[slices.Index(cmd, "--region")+1] }

// A stack lives in one region: the region it was first deployed to is
// remembered with its answers, so a later run without -region goes back
// there instead of creating a second stack in the default region, and a
// different -region is refused rather than silently doing the same.
func TestTheRegionIsRememberedWithTheAnswers(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	a := rememberedAnswers(t, nil)
	require.NoError(t, run(context.Background(), append(slices.Clone(a), "-region", "eu-west-1"), strings.NewReader(""), io.Discard, &fakeAWS{facts: roomy}))

	again := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, again))
	require.Len(t, again.deploys(), 1)
	assert.Equal(t, "eu-west-1", regionOf(again.deploys()[0]))

	stackThere := &fakeAWS{facts: roomy, existing: true, endpoint: "https://x.execute-api.eu-west-1.amazonaws.com/mcp"}
	err := run(context.Background(), append(slices.Clone(a), "-region", "us-east-2"), strings.NewReader(""), io.Discard, stackThere)
	require.ErrorContains(t, err, "eu-west-1", "the stack is still in eu-west-1")
	assert.Empty(t, stackThere.deploys())

	gone := &fakeAWS{existing: true, endpoint: "https://x.execute-api.eu-west-1.amazonaws.com/mcp"}
	require.NoError(t, run(context.Background(), append(slices.Clone(a), "-destroy"), strings.NewReader(""), io.Discard, gone))
	i := slices.IndexFunc(gone.ran, func(c []string) bool { return len(c) > 1 && c[1] == "delete" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "eu-west-1", regionOf(gone.ran[i]), "destroy goes where the stack is")
}

// Without -region or AWS_REGION, the AWS CLI's other setting is honoured.
func TestTheRegionDefaultsToAWSRegionThenAWSDefaultRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-central-1")
	o, err := parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "eu-central-1", o.region)
	t.Setenv("AWS_REGION", "ap-south-1")
	o, err = parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "ap-south-1", o.region)
}

// A platform team's profile names its region in the AWS CLI's config
// file; sam and the CLI deploy there when nothing else is set, so must we
// (us-east-1 would be a second, silent region). The environment still
// comes first, as in the SDKs and the CLI.
func TestTheRegionOfTheAWSProfileIsUsedWhenTheEnvironmentNamesNone(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(config, []byte("[default]\nregion = ap-northeast-1\n\n[profile ops]\nregion = eu-north-1\n"), 0o600))
	t.Setenv("AWS_CONFIG_FILE", config)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "ops")
	o, err := parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "eu-north-1", o.region, "AWS_PROFILE's region")

	t.Setenv("AWS_PROFILE", "")
	o, err = parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "ap-northeast-1", o.region, "the default profile's region")

	t.Setenv("AWS_DEFAULT_REGION", "ca-central-1")
	o, err = parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "ca-central-1", o.region, "the environment before the profile")

	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "nosuch")
	_, err = parseArgs(context.Background(), nil)
	require.ErrorContains(t, err, "nosuch", "a profile that is not there is named, not replaced by us-east-1")
	o, err = parseArgs(context.Background(), []string{"-region", "sa-east-1"})
	require.NoError(t, err, "-region needs no profile region")
	assert.Equal(t, "sa-east-1", o.region)

	t.Setenv("AWS_PROFILE", "")
	require.NoError(t, os.WriteFile(config, nil, 0o600))
	o, err = parseArgs(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "us-east-1", o.region, "no region anywhere")
}

// sam delete answers a stack that is not there with an error message and
// exit status 0: the destroy says so and fails.
func TestDestroyOfAStackThatIsNotThereFails(t *testing.T) {
	aws := &fakeAWS{}
	err := run(context.Background(), args(t, "-destroy", "-yes", "-stack", "ig-test", "-region", "eu-west-1"), strings.NewReader(""), io.Discard, aws)
	require.ErrorContains(t, err, "no stack ig-test in eu-west-1")
	for _, c := range aws.ran {
		assert.NotEqual(t, "delete", c[1])
	}
}

// The checks read the account through boto3, which never sees the
// repository's samconfig.toml; sam would (a profile, a bucket there would
// send the deploy elsewhere than what was checked). Every sam command is
// given a configuration of its own, empty.
func TestEverySamCommandIgnoresTheRepositorysSamconfig(t *testing.T) {
	aws := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws))
	sams := 0
	for _, c := range aws.ran {
		if !strings.HasSuffix(c[0], "/sam") {
			continue
		}
		sams++
		i := slices.Index(c, "--config-file")
		require.GreaterOrEqual(t, i, 0, "%v", c)
		raw, err := os.ReadFile(c[i+1])
		require.NoError(t, err)
		assert.Empty(t, strings.TrimSpace(string(raw)))
		assert.True(t, filepath.IsAbs(c[i+1]), "sam reads a relative --config-file against the template's folder")
	}
	assert.Equal(t, 2, sams, "build and deploy")
}

// Number parameters are checked as CloudFormation checks them, before the
// build, not at change-set creation after it.
func TestNumberParametersAreCheckedBeforeTheBuild(t *testing.T) {
	for k, v := range map[string]string{"DueShards": "300", "DownstreamSafeConcurrency": "ten", "AuthRejectionRateAlarmPercent": "0", "UnknownAgeAlarmMinutes": "1.5x"} {
		aws := &fakeAWS{facts: roomy}
		err := run(context.Background(), rememberedAnswers(t, map[string]string{k: v}), strings.NewReader(""), io.Discard, aws)
		require.ErrorContains(t, err, k, v)
		assert.Empty(t, aws.deploys(), k)
	}
	aws := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, map[string]string{"DueShards": "256", "UnknownAgeAlarmMinutes": "30"}), strings.NewReader(""), io.Discard, aws))
}

// An alarm topic or a KMS key in another region than the stack's, or an
// alarm topic that is no SNS ARN, would fail late (CloudWatch refuses the
// action while the stack is created, KMS refuses decrypt at cold start).
func TestARNsOfAnotherRegionOrNoARNAtAllAreRefused(t *testing.T) {
	for name, answer := range map[string]map[string]string{
		"topic not an ARN":          {"AlarmTopicArn": "oncall"},
		"topic in another region":   {"AlarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:oncall"},
		"KMS key in another region": {"DownstreamApiKeyKmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/0f5e8e0a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"},
	} {
		aws := &fakeAWS{facts: roomy}
		err := run(context.Background(), append(rememberedAnswers(t, answer), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws)
		require.Error(t, err, name)
		assert.Empty(t, aws.deploys(), name)
	}
	aws := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), append(rememberedAnswers(t, map[string]string{"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:oncall"}), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws))
}

// The reservations default to the template's own defaults, read on every
// run, and only a choice (0 for an account without headroom) is written
// down: a template default changed later reaches the next deploy.
func TestReservationDefaultsComeFromTheTemplateAndAreNotWrittenDown(t *testing.T) {
	a := rememberedAnswers(t, nil)
	aws := &fakeAWS{facts: roomy, edit: nil}
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws))
	state := a[slices.Index(a, "-state")+1]
	raw, err := os.ReadFile(filepath.Join(state, "intentgate-dev.json"))
	require.NoError(t, err)
	var saved map[string]string
	require.NoError(t, json.Unmarshal(raw, &saved))
	assert.NotContains(t, saved, "McpReservedConcurrency")
	assert.NotContains(t, saved, "ReconcilerReservedConcurrency")
	tpl, err := loadParameters("../../template.yaml")
	require.NoError(t, err)
	assert.Equal(t, *tpl["McpReservedConcurrency"].Default, overridesOf(aws.deploys()[0])["McpReservedConcurrency"])
}

// In gateway mode the authorizer needs an audience, which without a
// custom domain only the first deploy reveals: an empty JwtAudience means
// the endpoint, filled in at each deploy and never written down (a
// redeployed stack gets a new endpoint).
func TestAGatewayModeAudienceLeftEmptyIsTheEndpoint(t *testing.T) {
	endpoint := "https://abc.execute-api.us-east-1.amazonaws.com/mcp"
	a := rememberedAnswers(t, map[string]string{"ResourceUrl": "", "GatewayJwtAuthorizer": "true", "GatewayRequiredScope": "mcp:tools"})
	aws := &fakeAWS{facts: roomy, endpoint: endpoint} // the issuer out of reach: reported, not refused
	require.NoError(t, run(context.Background(), a, strings.NewReader(""), io.Discard, aws))
	deploys := aws.deploys()
	require.Len(t, deploys, 2)
	assert.Equal(t, placeholderResourceURL, overridesOf(deploys[0])["JwtAudience"])
	assert.Equal(t, endpoint, overridesOf(deploys[1])["JwtAudience"])
	state := a[slices.Index(a, "-state")+1]
	raw, err := os.ReadFile(filepath.Join(state, "intentgate-dev.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), endpoint)
}

// The functions fetch JwksUrl at every cold start and refuse to start
// without a key they can read: a JWKS URL that is not there, or holds no
// such key, is refused before anything is built, in either auth mode. One
// this machine can not reach is reported and deployed.
func TestTheJWKSTheFunctionsFetchIsCheckedBeforeDeploying(t *testing.T) {
	const jwks = "https://auth.example.com/jwks.json"
	rsaKeys := `{"keys":[{"kty":"RSA","use":"sig","kid":"r1","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}]}`
	for name, p := range map[string]page{
		"not there":           {404, "not found"},
		"not a key set":       {200, "<html>"},
		"no keys":             {200, `{"keys":[]}`},
		"no key to read":      {200, `{"keys":[{"kty":"AKP","kid":"pq"}]}`},
		"only for encrypting": {200, strings.Replace(rsaKeys, `"use":"sig"`, `"use":"enc"`, 1)},
	} {
		aws := &fakeAWS{facts: roomy, web: map[string]page{jwks: p}}
		err := run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, aws)
		require.ErrorContains(t, err, "JwksUrl", name)
		assert.Empty(t, aws.ran, "%s: refused before anything ran", name)
	}
	// In gateway mode the function starts only with an RSA key there (what
	// the authorizer verifies), whatever the discovery document names.
	ecKeys := `{"keys":[{"kty":"EC","use":"sig","kid":"e1","alg":"ES256","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	gatewayEC := &fakeAWS{facts: roomy, web: map[string]page{jwks: {200, ecKeys}}}
	err := run(context.Background(), rememberedAnswers(t, map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "mcp"}),
		strings.NewReader(""), io.Discard, gatewayEC)
	require.ErrorContains(t, err, "RSA")
	assert.Empty(t, gatewayEC.deploys())
	tokenEC := &fakeAWS{facts: roomy, web: map[string]page{jwks: {200, ecKeys}}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, tokenEC), "token mode reads EC keys")

	ok := &fakeAWS{facts: roomy, web: map[string]page{jwks: {200, rsaKeys}}}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), io.Discard, ok))
	require.Len(t, ok.deploys(), 1)
	var out strings.Builder
	unreachable := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), &out, unreachable))
	assert.Contains(t, out.String(), "Could not check")
	require.Len(t, unreachable.deploys(), 1)
}

// The functions read each SecureString at cold start: a parameter that is
// not there, holds its key in plain text, or is encrypted with a KMS key
// the functions are not granted would deploy functions that can not start
// (and the first create runs no PreTraffic check). Checked from the
// parameters' metadata only (ssm:DescribeParameters: never a value);
// without that permission it is reported, not held against the deploy.
func TestTheSecureStringsAreCheckedBeforeDeploying(t *testing.T) {
	const kmsKey = "arn:aws:kms:us-east-1:123456789012:key/0f5e8e0a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
	stored := func(edit func(map[string]ssmParameter)) map[string]ssmParameter {
		m := map[string]ssmParameter{
			"/intentgate/dev/risk-api-key":    {Type: "SecureString", KeyID: "alias/aws/ssm"},
			"/intentgate/dev/release-api-key": {Type: "SecureString", KeyID: "alias/aws/ssm"},
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	for name, tc := range map[string]struct {
		ssm     map[string]ssmParameter
		answers map[string]string
		says    string
	}{
		"the Risk key missing":    {stored(func(m map[string]ssmParameter) { delete(m, "/intentgate/dev/risk-api-key") }), nil, "/intentgate/dev/risk-api-key does not exist"},
		"a plain String":          {stored(func(m map[string]ssmParameter) { m["/intentgate/dev/release-api-key"] = ssmParameter{Type: "String"} }), nil, "not a SecureString"},
		"the task id key missing": {stored(nil), map[string]string{"TaskIdKeyParameterName": "/intentgate/dev/task-id-key"}, "task-id-key does not exist"},
		"a customer key without the answer": {stored(func(m map[string]ssmParameter) {
			m["/intentgate/dev/risk-api-key"] = ssmParameter{Type: "SecureString", KeyID: kmsKey}
		}), nil, "DownstreamApiKeyKmsKeyArn"},
		"another customer key than the answer": {stored(func(m map[string]ssmParameter) {
			m["/intentgate/dev/risk-api-key"] = ssmParameter{Type: "SecureString", KeyID: "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"}
		}), map[string]string{"DownstreamApiKeyKmsKeyArn": kmsKey}, "DownstreamApiKeyKmsKeyArn"},
	} {
		aws := &fakeAWS{facts: roomy, ssm: tc.ssm}
		err := run(context.Background(), append(rememberedAnswers(t, tc.answers), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws)
		require.ErrorContains(t, err, tc.says, name)
		assert.Empty(t, aws.deploys(), name)
	}
	for name, tc := range map[string]struct {
		ssm     map[string]ssmParameter
		answers map[string]string
	}{
		"the AWS-managed key": {stored(nil), nil},
		"the answered key, by ARN": {stored(func(m map[string]ssmParameter) {
			m["/intentgate/dev/risk-api-key"] = ssmParameter{Type: "SecureString", KeyID: kmsKey}
		}), map[string]string{"DownstreamApiKeyKmsKeyArn": kmsKey}},
		"the answered key, by id": {stored(func(m map[string]ssmParameter) {
			m["/intentgate/dev/risk-api-key"] = ssmParameter{Type: "SecureString", KeyID: "0f5e8e0a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"}
		}), map[string]string{"DownstreamApiKeyKmsKeyArn": kmsKey}},
	} {
		aws := &fakeAWS{facts: roomy, ssm: tc.ssm}
		require.NoError(t, run(context.Background(), append(rememberedAnswers(t, tc.answers), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws), name)
		assert.Len(t, aws.deploys(), 1, name)
	}
	var out strings.Builder
	denied := &fakeAWS{facts: roomy} // no ssm answers: the call is refused
	require.NoError(t, run(context.Background(), rememberedAnswers(t, nil), strings.NewReader(""), &out, denied))
	assert.Contains(t, out.String(), "Could not check the SecureStrings")
	assert.Len(t, denied.deploys(), 1)
}

// Without -yes a run may ask questions, and sam asks for confirmation:
// with stdin not a terminal (CI, a pipe) it stops before anything runs.
func TestARunThatMayAskNeedsATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	assert.ErrorContains(t, needsTerminal(context.Background(), []string{"-stack", "ig-ci"}, r), "-yes")
	assert.ErrorContains(t, needsTerminal(context.Background(), []string{"-destroy"}, r), "-yes")
	assert.NoError(t, needsTerminal(context.Background(), []string{"-yes"}, r))
	assert.NoError(t, needsTerminal(context.Background(), []string{"-nope"}, r), "a bad flag is run's to report")
}

// Ctrl-C at a guided question ends the run there: the interrupt is
// caught (so that sam, later, can clean up a failed create), and a
// question that went on waiting for a line would swallow it.
func TestAnInterruptEndsAQuestionWaitingForAnAnswer(t *testing.T) {
	stdin, _ := io.Pipe() // a terminal nobody types into
	ctx, interrupt := context.WithCancel(context.Background())
	p := prompter{in: bufio.NewReader(stdin), out: io.Discard, interactive: true}
	answered := make(chan error, 1)
	go func() {
		_, err := p.ask(ctx, "Token issuer", "")
		answered <- err
	}()
	interrupt()
	select {
	case err := <-answered:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the question still waits for a line after the interrupt")
	}
}
