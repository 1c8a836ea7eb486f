package main

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The collector is restored once the first invocation has been answered,
// when the second arrives: not before (it would run a cycle inside the
// cold start's first answer), and not again on later invocations.
func TestAfterFirstAnswerRunsOnceWhenTheSecondInvocationArrives(t *testing.T) {
	var seen []string
	handle := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		seen = append(seen, "answer")
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	}
	wrapped := afterFirstAnswer(handle, func() { seen = append(seen, "then") })
	for range 3 {
		resp, err := wrapped(context.Background(), events.APIGatewayV2HTTPRequest{})
		assert.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
	}
	assert.Equal(t, []string{"answer", "then", "answer", "answer"}, seen)
}

// The collector is off during the cold start and stays off after it only
// when the memory limit can stand in for it with room to spare; an
// operator's own GOGC is never overridden.
func TestTheCollectorPolicyLeavesTheOperatorsGOGCAlone(t *testing.T) {
	const limit = 200 << 20
	for _, tc := range []struct {
		name            string
		policy          collectorPolicy
		offDuringStart  bool
		staysOffAfterIt bool
	}{
		{"template defaults: a limit, no GOGC", collectorPolicy{memoryLimit: limit}, true, true},
		{"no memory limit: the collector returns after the first answer", collectorPolicy{memoryLimit: math.MaxInt64}, true, false},
		{"a limit too small to stand in for the collector: it returns rather than thrash at the limit", collectorPolicy{memoryLimit: 32 << 20}, true, false},
		{"the least limit it stays off under", collectorPolicy{memoryLimit: minLimitCollectorOff}, true, true},
		{"the operator set GOGC: untouched", collectorPolicy{memoryLimit: limit, operatorGOGC: true}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.offDuringStart, tc.policy.offDuringStart())
			assert.Equal(t, tc.staysOffAfterIt, tc.policy.staysOff())
		})
	}
}

func TestTheCollectorPolicyReadsGOGCAndTheRuntimesLimit(t *testing.T) {
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	debug.SetMemoryLimit(200 << 20)

	p := collectorPolicyFrom(func(string) (string, bool) { return "", false })
	assert.Equal(t, collectorPolicy{memoryLimit: 200 << 20}, p)
	p = collectorPolicyFrom(func(k string) (string, bool) { return "150", k == "GOGC" })
	assert.True(t, p.operatorGOGC)
	p = collectorPolicyFrom(func(k string) (string, bool) { return "", k == "GOGC" })
	assert.False(t, p.operatorGOGC, "an empty GOGC is the runtime's default, not a choice")
}

// Outside Lambda an interrupt ends the run's context; under Lambda no
// signal is listened for (the runtime sends none without extensions, and
// setting up delivery costs the cold start).
func TestAnInterruptEndsTheRunOutsideLambdaOnly(t *testing.T) {
	ctx, stop := runContext(false)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not end the run outside Lambda")
	}

	lambdaCtx, lambdaStop := runContext(true)
	assert.NoError(t, lambdaCtx.Err())
	lambdaStop()
	assert.Error(t, lambdaCtx.Err(), "stop still ends it")
}
