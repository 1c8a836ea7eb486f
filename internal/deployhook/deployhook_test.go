package deployhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/deployhook"
)

const target = "arn:aws:lambda:eu-west-1:123456789012:function:intentgate-prod-mcp:42"

// fakeLambda answers every invocation with result and functionError, or
// err, and remembers what it was sent.
type fakeLambda struct {
	result        []byte
	functionError string
	err           error
	targets       []string
	payloads      [][]byte
}

func (f *fakeLambda) Invoke(_ context.Context, target string, payload []byte) ([]byte, string, error) {
	f.targets = append(f.targets, target)
	f.payloads = append(f.payloads, payload)
	return f.result, f.functionError, f.err
}

type verdict struct {
	deployment, execution string
	succeeded             bool
}

type fakeCodeDeploy struct {
	verdicts []verdict
	err      error
}

func (f *fakeCodeDeploy) Report(_ context.Context, deploymentID, executionID string, succeeded bool) error {
	f.verdicts = append(f.verdicts, verdict{deploymentID, executionID, succeeded})
	return f.err
}

func answer(t *testing.T, status int, body string) []byte {
	t.Helper()
	b, err := json.Marshal(events.APIGatewayV2HTTPResponse{StatusCode: status, Body: body})
	require.NoError(t, err)
	return b
}

var lifecycle = deployhook.Event{DeploymentID: "d-ABC123", LifecycleEventHookExecutionID: "exec-1"}

func run(t *testing.T, probe deployhook.Probe, fn *fakeLambda) *fakeCodeDeploy {
	t.Helper()
	cd := &fakeCodeDeploy{}
	hook := deployhook.Hook{Target: target, Probe: probe, Invoker: fn, Reporter: cd, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	require.NoError(t, hook.Handle(context.Background(), lifecycle))
	require.Len(t, cd.verdicts, 1, "exactly one verdict per hook execution")
	assert.Equal(t, "d-ABC123", cd.verdicts[0].deployment)
	assert.Equal(t, "exec-1", cd.verdicts[0].execution)
	require.Equal(t, []string{target}, fn.targets, "the version being deployed, and only it, is invoked once")
	return cd
}

func TestANewMCPVersionThatAnswersItsHealthCheckPasses(t *testing.T) {
	fn := &fakeLambda{result: answer(t, 204, "")}
	cd := run(t, deployhook.ProbeMCP, fn)
	assert.True(t, cd.verdicts[0].succeeded)

	var sent events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(fn.payloads[0], &sent))
	assert.Equal(t, "GET", sent.RequestContext.HTTP.Method)
	assert.Equal(t, "/healthz", sent.RawPath, "a route without effects or credentials")
}

func TestANewVersionIsStoppedWhenItsCheckFails(t *testing.T) {
	for name, fn := range map[string]*fakeLambda{
		"the start failed":                 {result: []byte(`{"errorType":"Runtime.ExitError"}`), functionError: "Unhandled"},
		"the health check is not 204":      {result: answer(t, 500, `{"error":"keys unavailable"}`)},
		"the answer is not a response":     {result: []byte(`"hello"`)},
		"the invocation could not be made": {err: errors.New("AccessDeniedException")},
	} {
		t.Run(name, func(t *testing.T) {
			cd := run(t, deployhook.ProbeMCP, fn)
			assert.False(t, cd.verdicts[0].succeeded)
		})
	}
}

func TestANewReconcilerVersionIsCheckedWithAScheduledSweep(t *testing.T) {
	fn := &fakeLambda{result: []byte(`{"swept":0}`)}
	cd := run(t, deployhook.ProbeReconciler, fn)
	assert.True(t, cd.verdicts[0].succeeded)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(fn.payloads[0], &sent))
	assert.Equal(t, "aws.events", sent["source"])
	assert.Equal(t, "Scheduled Event", sent["detail-type"])

	failing := &fakeLambda{result: []byte(`{"errorMessage":"sweep: table not found"}`), functionError: "Unhandled"}
	assert.False(t, run(t, deployhook.ProbeReconciler, failing).verdicts[0].succeeded)
}

// A verdict CodeDeploy never received is no verdict: the invocation fails,
// and CodeDeploy fails the hook when it times out.
func TestAVerdictThatCannotBeReportedFailsTheInvocation(t *testing.T) {
	cd := &fakeCodeDeploy{err: errors.New("throttled")}
	hook := deployhook.Hook{Target: target, Probe: deployhook.ProbeMCP, Invoker: &fakeLambda{result: answer(t, 204, "")}, Reporter: cd,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := hook.Handle(context.Background(), lifecycle)
	assert.ErrorContains(t, err, "report to CodeDeploy")
}

func TestAnEventThatIsNotACodeDeployLifecycleEventIsRefusedWithoutInvoking(t *testing.T) {
	fn, cd := &fakeLambda{}, &fakeCodeDeploy{}
	hook := deployhook.Hook{Target: target, Probe: deployhook.ProbeMCP, Invoker: fn, Reporter: cd, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	assert.Error(t, hook.Handle(context.Background(), deployhook.Event{}))
	assert.Empty(t, fn.targets)
	assert.Empty(t, cd.verdicts)
}

func TestTheHookChecksOnlyAPublishedVersion(t *testing.T) {
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	got, probe, err := deployhook.Config(lookup(map[string]string{"INTENTGATE_HOOK_TARGET": target, "INTENTGATE_HOOK_PROBE": "mcp"}))
	require.NoError(t, err)
	assert.Equal(t, target, got)
	assert.Equal(t, deployhook.ProbeMCP, probe)
	for name, env := range map[string]map[string]string{
		"no target":     {"INTENTGATE_HOOK_PROBE": "mcp"},
		"$LATEST":       {"INTENTGATE_HOOK_TARGET": "arn:aws:lambda:eu-west-1:123456789012:function:f:$LATEST", "INTENTGATE_HOOK_PROBE": "mcp"},
		"an alias":      {"INTENTGATE_HOOK_TARGET": "arn:aws:lambda:eu-west-1:123456789012:function:f:live", "INTENTGATE_HOOK_PROBE": "mcp"},
		"unqualified":   {"INTENTGATE_HOOK_TARGET": "arn:aws:lambda:eu-west-1:123456789012:function:f", "INTENTGATE_HOOK_PROBE": "mcp"},
		"unknown probe": {"INTENTGATE_HOOK_TARGET": target, "INTENTGATE_HOOK_PROBE": "tools"},
		"no probe":      {"INTENTGATE_HOOK_TARGET": target},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := deployhook.Config(lookup(env))
			assert.Error(t, err)
		})
	}
}
