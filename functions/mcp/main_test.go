package main

import (
	"context"
	"math"
	"os"
	"runtime"
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
		heap            uint64
		offDuringStart  bool
		staysOffAfterIt bool
	}{
		{"template defaults: a limit, no GOGC, a small heap", collectorPolicy{memoryLimit: limit}, 12 << 20, true, true},
		{"no memory limit: the collector returns after the first answer", collectorPolicy{memoryLimit: math.MaxInt64}, 12 << 20, true, false},
		{"a heap near the limit: the collector returns rather than thrash at the limit", collectorPolicy{memoryLimit: limit}, 120 << 20, true, false},
		{"the operator set GOGC: untouched", collectorPolicy{memoryLimit: limit, operatorGOGC: true}, 12 << 20, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.offDuringStart, tc.policy.offDuringStart())
			var heapRead bool
			heap := func() uint64 { heapRead = true; return tc.heap }
			assert.Equal(t, tc.staysOffAfterIt, tc.policy.staysOff(heap))
			needsHeap := !tc.policy.operatorGOGC && tc.policy.memoryLimit != math.MaxInt64
			assert.Equal(t, needsHeap, heapRead, "the heap is read (a stop-the-world) only when the answer depends on it")
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

// The collector's decision after the start rests on this reading: what is
// allocated and not freed, as MemStats' HeapAlloc counts it.
func TestHeapAllocatedCountsWhatIsAllocatedAndNotFreed(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := heapAllocated()
	kept := make([]byte, 8<<20)
	after := heapAllocated()
	assert.GreaterOrEqual(t, after-before, uint64(len(kept)))
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	assert.InDelta(t, float64(mem.HeapAlloc), float64(heapAllocated()), float64(2<<20), "as MemStats.HeapAlloc counts it, less what the allocation caches hold")
	runtime.KeepAlive(kept)
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
