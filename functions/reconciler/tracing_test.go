package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// TestReconcilerInvocationIsTraced runs a traced stream invocation through
// the real handler with the X-Ray daemon address on a loopback UDP socket:
// the invocation is a subsegment of the function's segment, annotated with
// tool and state; every DynamoDB call and the provider probe are its
// children; every audit record carries the trace id.
func TestReconcilerInvocationIsTraced(t *testing.T) {
	daemon, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = daemon.Close() })
	t.Setenv("AWS_XRAY_DAEMON_ADDRESS", daemon.LocalAddr().String()) // read by the tracer as under Lambda
	h := newHarnessWith(t, map[string]string{"INTENTGATE_TRACING": "true"})
	op := h.submitUnknown(t, "op-sample-0001", "O20260728001")
	h.clock.Advance(h.r.app.Executor.SettledAt(op, riskreview.DefaultRecovery().SettleWindow).Sub(h.clock.Now()))
	h.out.Reset()

	const traceID = "1-6a8861ec-3c1f0e7d9b2a4c5e6f708193"
	ctx := context.WithValue(context.Background(), obs.LambdaTraceHeaderKey, //nolint:staticcheck // aws-lambda-go's key is a string
		"Root="+traceID+";Parent=53995c3f42cd8ad8;Sampled=1")
	out, err := h.r.handle(ctx, sample(t, "stream-unknown.json"))
	require.NoError(t, err)
	require.NotNil(t, out)
	got, err := h.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, got.State)

	// Every span is sent when it ends, before handle returns; the
	// invocation's own subsegment ends last.
	var docs []map[string]any
	buf := make([]byte, 64<<10)
	for len(docs) == 0 || docs[len(docs)-1]["name"] != "intentgate-reconciler" {
		require.NoError(t, daemon.SetReadDeadline(time.Now().Add(10*time.Second))) // a safety net, not a timing check
		n, _, err := daemon.ReadFrom(buf)
		require.NoError(t, err, "segments so far: %v", docs)
		_, body, _ := strings.Cut(string(buf[:n]), "\n")
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &doc))
		docs = append(docs, doc)
	}
	root := docs[len(docs)-1]
	assert.Equal(t, traceID, root["trace_id"])
	assert.Equal(t, "53995c3f42cd8ad8", root["parent_id"], "a child of the function's segment")
	annotations, _ := root["annotations"].(map[string]any)
	assert.Equal(t, "request_risk_review", annotations["tool"], "%v", root)
	assert.Equal(t, "SUCCEEDED", annotations["state"], "%v", root)

	var dynamo, remote int
	for _, d := range docs[:len(docs)-1] {
		assert.Equal(t, traceID, d["trace_id"])
		switch d["namespace"] {
		case "aws":
			dynamo++
			assert.Equal(t, "DynamoDB", d["name"])
			assert.NotEmpty(t, d["aws"].(map[string]any)["operation"])
		case "remote":
			remote++
		}
		if d["parent_id"] == root["id"] {
			continue
		}
		assert.Fail(t, "a span outside the invocation's subsegment", "%v", d)
	}
	assert.Positive(t, dynamo, "DynamoDB calls are traced")
	assert.Positive(t, remote, "the provider probe is traced")

	var audits int
	for line := range strings.SplitSeq(h.out.String(), "\n") {
		if !strings.Contains(line, `"msg":"audit"`) {
			continue
		}
		audits++
		assert.Contains(t, line, `"xray_trace_id":"`+traceID+`"`)
	}
	assert.Positive(t, audits)
}
