package main

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
)

// The collector is restored once the first invocation has been answered:
// not before (it would run a cycle inside the cold start's first answer),
// and not again on later invocations.
func TestAfterFirstAnswerRunsOnceAfterTheFirstInvocationReturns(t *testing.T) {
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
