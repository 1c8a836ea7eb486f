package deployhook_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/deployhook"
)

// busyLambda answers the first `throttled` invocations as Lambda does when
// the function's reserved concurrency is all in use (TooManyRequestsException,
// wrapped as the SDK wraps it), then with answer.
type busyLambda struct {
	throttled int
	answer    []byte
	calls     int
}

func (b *busyLambda) Invoke(_ context.Context, _ string, _ []byte) ([]byte, string, error) {
	b.calls++
	if b.calls <= b.throttled {
		return nil, "", fmt.Errorf("operation error Lambda: Invoke, exceeded maximum number of attempts, 3: %w",
			&lambdatypes.TooManyRequestsException{Message: aws.String("Rate Exceeded."), Reason: lambdatypes.ThrottleReasonReservedFunctionConcurrentInvocationLimitExceeded})
	}
	return b.answer, "", nil
}

// Reserved concurrency is the function's, every version's included: while
// production traffic (the reconciler: 2 instances, a stream batch and a
// sweep of up to 60 s) holds all of it, Lambda refuses the new version's
// invocation with TooManyRequestsException. That says nothing about the new
// version: the hook waits for a free instance within its own time instead
// of failing the deployment (which rolls back the fix a busy system needs).
func TestAProbeThrottledByReservedConcurrencyIsRetriedNotFailed(t *testing.T) {
	fn := &busyLambda{throttled: 3, answer: []byte(`{"examined":0}`)}
	cd := &fakeCodeDeploy{}
	hook := deployhook.Hook{Target: target, Probe: deployhook.ProbeReconciler, Invoker: fn, Reporter: cd,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryWait: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, hook.Handle(ctx, lifecycle))
	require.Len(t, cd.verdicts, 1)
	assert.True(t, cd.verdicts[0].succeeded, "a throttled invocation is no verdict on the version")
	assert.Equal(t, 4, fn.calls)
}

// ctxReporter refuses a report made with a context already done, as the
// SDK does.
type ctxReporter struct{ fakeCodeDeploy }

func (c *ctxReporter) Report(ctx context.Context, deploymentID, executionID string, succeeded bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.fakeCodeDeploy.Report(ctx, deploymentID, executionID, succeeded)
}

// A function that stays throttled for the hook's whole time fails the
// check, and the verdict still reaches CodeDeploy: the probe stops with
// time left for the report, or CodeDeploy would wait out its hour.
func TestAProbeThrottledToTheEndStillReportsItsVerdict(t *testing.T) {
	fn := &busyLambda{throttled: 1 << 30}
	cd := &ctxReporter{}
	hook := deployhook.Hook{Target: target, Probe: deployhook.ProbeReconciler, Invoker: fn, Reporter: cd,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryWait: time.Millisecond, ReportReserve: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	require.NoError(t, hook.Handle(ctx, lifecycle))
	require.Len(t, cd.verdicts, 1)
	assert.False(t, cd.verdicts[0].succeeded)
	assert.Greater(t, fn.calls, 1)
}
