package obs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A handler panic is answered 500 by the Lambda adapter (or the net/http
// server) above the tracer. The request's subsegment must still reach the
// daemon, marked as a fault with the panic as its cause: otherwise the one
// request that most needs its trace has none, and the spans it already sent
// (DynamoDB calls) name a parent X-Ray never receives.
func TestAPanickingHandlerStillSendsItsSubsegmentAsAFault(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("nil map write")
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(lambdaContext())

	func() {
		defer func() {
			assert.Equal(t, "nil map write", recover(), "the panic goes on to the adapter, unchanged")
		}()
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()

	doc := d.next(t)
	assert.Equal(t, "intentgate-mcp", doc["name"])
	assert.Equal(t, "53995c3f42cd8ad8", doc["parent_id"])
	assert.Equal(t, true, doc["fault"])
	assert.Contains(t, doc, "end_time")
	cause, _ := doc["cause"].(map[string]any)
	require.NotNil(t, cause, "the panic is the cause")
	exceptions, _ := cause["exceptions"].([]any)
	require.Len(t, exceptions, 1)
	assert.Contains(t, exceptions[0].(map[string]any)["message"], "nil map write")
	httpInfo, _ := doc["http"].(map[string]any)
	require.NotNil(t, httpInfo)
	assert.InDelta(t, 500.0, httpInfo["response"].(map[string]any)["status"], 0, "what the adapter answers")
}

// The reconciler's invocation runs in Segment; aws-lambda-go turns a panic
// into a function error and ends the process, so the subsegment must be
// sent before the panic leaves Segment.
func TestAPanickingSegmentStillSendsItsSubsegmentAsAFault(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)

	func() {
		defer func() {
			assert.Equal(t, "index out of range", recover(), "the panic goes on, unchanged")
		}()
		_ = tr.Segment(lambdaContext(), "intentgate-reconciler", func(context.Context) error {
			panic("index out of range")
		})
	}()

	doc := d.next(t)
	assert.Equal(t, "intentgate-reconciler", doc["name"])
	assert.Equal(t, true, doc["fault"])
	cause, _ := doc["cause"].(map[string]any)
	require.NotNil(t, cause)
	exceptions, _ := cause["exceptions"].([]any)
	require.Len(t, exceptions, 1)
	assert.Contains(t, exceptions[0].(map[string]any)["message"], "index out of range")
}
