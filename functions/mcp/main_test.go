package main

import (
	"context"
	"math"
	"runtime/debug"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
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

func TestMemoryLimitInForceFollowsTheRuntimesLimit(t *testing.T) {
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })

	debug.SetMemoryLimit(math.MaxInt64)
	assert.False(t, memoryLimitInForce(), "no limit")
	debug.SetMemoryLimit(200 << 20)
	assert.True(t, memoryLimitInForce(), "GOMEMLIMIT=200MiB, as the template sets it")
}
