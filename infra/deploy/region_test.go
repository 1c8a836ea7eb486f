package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// regionalAWS is fakeAWS with a stack in some regions only, and a build
// that may fail.
type regionalAWS struct {
	*fakeAWS
	stackIn   map[string]bool // regions the stack is in; nil: every region (fakeAWS's own)
	failBuild bool
}

func (f *regionalAWS) run(ctx context.Context, out io.Writer, cmd ...string) error {
	if f.failBuild && len(cmd) > 1 && cmd[1] == "build" {
		f.ran = append(f.ran, cmd)
		return errors.New("sam build: exit status 1")
	}
	return f.fakeAWS.run(ctx, out, cmd...)
}

func (f *regionalAWS) output(ctx context.Context, cmd ...string) ([]byte, error) {
	if f.stackIn != nil && strings.Contains(cmd[2], "describe_stacks") && !f.stackIn[cmd[4]] {
		f.ran = append(f.ran, cmd)
		return []byte("{}\n"), nil
	}
	return f.fakeAWS.output(ctx, cmd...)
}

func stateOf(a []string) string { return a[slices.Index(a, "-state")+1] }

func writeRegion(t *testing.T, a []string, region string) string {
	t.Helper()
	p := filepath.Join(stateOf(a), "intentgate-dev.region")
	require.NoError(t, os.WriteFile(p, []byte(region+"\n"), 0o600))
	return p
}

// A region remembered for a stack that is no longer there (deleted in
// the console, or a first create that --on-failure DELETE removed) must
// not refuse a deploy elsewhere, and make destroy must be a way out.
func TestARegionRememberedForAStackThatIsGoneDoesNotBlockADeployElsewhere(t *testing.T) {
	a := rememberedAnswers(t, nil)
	p := writeRegion(t, a, "eu-west-1")
	aws := &fakeAWS{facts: roomy} // no stack in any region
	err := run(context.Background(), append(slices.Clone(a), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws)
	require.NoError(t, err, "there is no stack in eu-west-1: nothing would be duplicated")
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "us-east-1\n", string(raw), "the stack is in us-east-1 now")
}

func TestDestroyOfAStackThatIsGoneForgetsItsRegion(t *testing.T) {
	a := rememberedAnswers(t, nil)
	p := writeRegion(t, a, "eu-west-1")
	err := run(context.Background(), append(slices.Clone(a), "-destroy"), strings.NewReader(""), io.Discard, &fakeAWS{})
	require.ErrorContains(t, err, "no stack")
	_, statErr := os.Stat(p)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "the stale region stays remembered: every -region is refused and make destroy can not clear it")
}

// The region is remembered with the answers, before a stack exists; one
// remembered for a first create that failed (no stack anywhere) yields to
// another -region rather than refusing it.
func TestARegionRememberedForAFailedFirstCreateYieldsToAnotherRegion(t *testing.T) {
	a := rememberedAnswers(t, nil)
	failed := &regionalAWS{fakeAWS: &fakeAWS{facts: roomy}, failBuild: true}
	err := run(context.Background(), append(slices.Clone(a), "-region", "eu-west-1"), strings.NewReader(""), io.Discard, failed)
	require.ErrorContains(t, err, "sam build")
	retry := &fakeAWS{facts: roomy}
	require.NoError(t, run(context.Background(), append(slices.Clone(a), "-region", "us-east-1"), strings.NewReader(""), io.Discard, retry))
	require.Len(t, retry.deploys(), 1)
	assert.Equal(t, "us-east-1", regionOf(retry.deploys()[0]))
}

// sam delete without --no-prompts exits 0 when its confirmation is
// declined: the stack stays, and so does its remembered region.
func TestADeclinedDestroyKeepsTheRegion(t *testing.T) {
	a := rememberedAnswers(t, nil)
	a = slices.DeleteFunc(a, func(s string) bool { return s == "-yes" })
	p := writeRegion(t, a, "eu-west-1")
	aws := &fakeAWS{existing: true, endpoint: "https://x.execute-api.eu-west-1.amazonaws.com/mcp"} // still there after "delete"
	require.NoError(t, run(context.Background(), append(slices.Clone(a), "-destroy"), strings.NewReader(""), io.Discard, aws))
	_, err := os.Stat(p)
	assert.NoError(t, err, "the stack is still in eu-west-1; the next deploy without -region goes to the default region")
}

// Answers from before regions were remembered (no .region file): the
// region then was AWS_REGION or us-east-1, not AWS_DEFAULT_REGION. A run
// without -region that finds no stack where the defaults point asks for
// -region instead of creating a second stack there.
func TestAStackDeployedBeforeRegionsWereRememberedIsNotMovedToAnotherRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	a := rememberedAnswers(t, nil) // ssm nil: deployer without ssm:DescribeParameters
	require.NoError(t, os.Remove(filepath.Join(stateOf(a), "intentgate-dev.region")), "answers from before regions were remembered")
	aws := &regionalAWS{fakeAWS: &fakeAWS{facts: roomy, existing: true, endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp"},
		stackIn: map[string]bool{"us-east-1": true}}
	err := run(context.Background(), a, strings.NewReader(""), io.Discard, aws)
	assert.Error(t, err, "answers exist but no stack in eu-west-1: ask for -region rather than create a second stack")
	for _, d := range aws.deploys() {
		assert.NotEqual(t, "eu-west-1", regionOf(d), "a second stack created in eu-west-1")
	}
}

// DescribeParameters answers on a best-effort basis: a page may hold none
// of the matches and a NextToken. The script reads every page, so an
// existing SecureString is never reported missing.
func TestTheSSMScriptReadsEveryPage(t *testing.T) {
	python := scriptPython(t)
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls++
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if req["NextToken"] == nil {
			_, _ = w.Write([]byte(`{"Parameters":[],"NextToken":"page2"}`))
			return
		}
		_, _ = w.Write([]byte(`{"Parameters":[{"Name":"/ig/risk","Type":"SecureString","KeyId":"alias/aws/ssm"}]}`))
	}))
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), python, "-c", ssmScript, "us-east-1", "/ig/risk")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ENDPOINT_URL=" + srv.URL, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	raw, err := cmd.Output()
	require.NoError(t, err)
	var facts ssmFacts
	require.NoError(t, json.Unmarshal(raw, &facts), string(raw))
	assert.Contains(t, facts.Parameters, "/ig/risk", "one page read (%d call): an existing SecureString reported missing, the deploy refused", calls)
}

// An alias is taken for the key it may name, as alias/x and as an alias
// ARN (put-parameter --key-id accepts both), and the AWS-managed key is
// known by its alias ARN too.
func TestAKMSAliasARNIsTakenLikeAnAlias(t *testing.T) {
	const kmsKey = "arn:aws:kms:us-east-1:123456789012:key/0f5e8e0a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
	for name, tc := range map[string]struct {
		keyID, grant string
	}{
		"customer alias ARN":    {"arn:aws:kms:us-east-1:123456789012:alias/intentgate", kmsKey},
		"aws/ssm, as alias ARN": {"arn:aws:kms:us-east-1:123456789012:alias/aws/ssm", ""},
	} {
		ssm := map[string]ssmParameter{
			"/intentgate/dev/risk-api-key":    {Type: "SecureString", KeyID: tc.keyID},
			"/intentgate/dev/release-api-key": {Type: "SecureString", KeyID: "alias/aws/ssm"},
		}
		answers := map[string]string{}
		if tc.grant != "" {
			answers["DownstreamApiKeyKmsKeyArn"] = tc.grant
		}
		aws := &fakeAWS{facts: roomy, ssm: ssm}
		err := run(context.Background(), append(rememberedAnswers(t, answers), "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws)
		assert.NoError(t, err, name)
	}
}

// A destroy creates nothing: it may name another region than the
// remembered one (a stray stack there can be removed).
func TestDestroyMayTargetAnotherRegionThanTheRememberedOne(t *testing.T) {
	a := rememberedAnswers(t, nil)
	writeRegion(t, a, "eu-west-1")
	aws := &regionalAWS{fakeAWS: &fakeAWS{existing: true, endpoint: "https://x.execute-api.us-east-1.amazonaws.com/mcp"}, stackIn: map[string]bool{"us-east-1": true}}
	err := run(context.Background(), append(slices.Clone(a), "-destroy", "-region", "us-east-1"), strings.NewReader(""), io.Discard, aws)
	assert.NoError(t, err, "a stray stack in us-east-1 can not be destroyed with make destroy")
}

// After a limit increase, -guided asks the reservations again: an empty
// line keeps the answer shown (0), "-" goes back to the template's
// default, which is then not written down.
func TestGuidedAsksTheReservationsAgain(t *testing.T) {
	a := rememberedAnswers(t, map[string]string{"McpReservedConcurrency": "0", "ReconcilerReservedConcurrency": "0"})
	a = slices.DeleteFunc(a, func(s string) bool { return s == "-yes" })
	aws := &fakeAWS{facts: roomy}
	var out strings.Builder
	in := strings.Repeat("\n", 15) + "-\n-\n" // after the 13 questions and gateway mode's 2
	require.NoError(t, run(context.Background(), append(a, "-guided"), strings.NewReader(in), &out, aws))
	assert.Contains(t, out.String(), "Reserved concurrency of the MCP function")
	tpl, err := loadParameters("../../template.yaml")
	require.NoError(t, err)
	deployed := overridesOf(aws.deploys()[0])
	assert.Equal(t, *tpl["McpReservedConcurrency"].Default, deployed["McpReservedConcurrency"])
	assert.Equal(t, *tpl["ReconcilerReservedConcurrency"].Default, deployed["ReconcilerReservedConcurrency"])
	raw, err := os.ReadFile(filepath.Join(stateOf(a), "intentgate-dev.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "ReservedConcurrency")

	kept := &fakeAWS{facts: roomy}
	b := rememberedAnswers(t, map[string]string{"McpReservedConcurrency": "0", "ReconcilerReservedConcurrency": "0"})
	b = slices.DeleteFunc(b, func(s string) bool { return s == "-yes" })
	require.NoError(t, run(context.Background(), append(b, "-guided"), strings.NewReader(strings.Repeat("\n", 40)), io.Discard, kept))
	assert.Equal(t, "0", overridesOf(kept.deploys()[0])["McpReservedConcurrency"], "an empty line keeps the answer shown")
}
