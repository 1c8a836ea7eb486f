package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/stack"
)

// TestInvocationsAreTracedAndEveryLineCarriesTheJoinKeys runs two traced
// invocations through the real handler, with the X-Ray daemon address on a
// loopback UDP socket: every DynamoDB call is a subsegment, the request's
// subsegment is annotated with tool, state and outcome, and every log line
// and audit record carries the function name, cold start, X-Ray trace id
// and API Gateway request id (the access log's key).
func TestInvocationsAreTracedAndEveryLineCarriesTheJoinKeys(t *testing.T) {
	daemon, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = daemon.Close() })
	t.Setenv("AWS_XRAY_DAEMON_ADDRESS", daemon.LocalAddr().String())

	ctx := context.Background()
	out := &syncBuffer{}
	s, err := stack.Start(ctx, stack.Config{
		EngineEndpoint: engine.Endpoint(), Table: enginetest.TableName(t), MCPAddrs: []string{"127.0.0.1:0"},
		ResourceURL: resource, Out: out,
		Env: map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "intentgate-test-mcp", "INTENTGATE_TRACING": "true",
			"INTENTGATE_BUDGET_STORE": slowMachineStoreBudget},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Apps[0].Store.DeleteTable(context.Background())
		s.Stop()
	})
	h, err := s.Apps[0].Handler(ctx)
	require.NoError(t, err)
	handle := lambdahttp.Handler(h, s.Apps[0].LambdaOptions())
	token, err := s.Issuer.Mint(issuer.Claims{Subject: "user-8c41e2", ClientID: "support-assistant", MerchantID: "M1", Audience: resource, TTL: time.Hour})
	require.NoError(t, err)

	const traceID = "1-6a8861ec-3c1f0e7d9b2a4c5e6f708192"
	lambdaIDs := map[string]string{} // gateway request id -> Lambda request id
	invoke := func(file, requestID string) string {
		ev := loadEvent(t, file, token)
		lctx := lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
		lctx = context.WithValue(lctx, obs.LambdaTraceHeaderKey, "Root="+traceID+";Parent=53995c3f42cd8ad8;Sampled=1")
		lctx, cancel := context.WithTimeout(lctx, 20*time.Second)
		defer cancel()
		resp, err := handle(lctx, ev)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, resp.Body)
		assert.Equal(t, requestID, resp.Headers["X-Request-Id"], "the caller sees the invocation's request id")
		lambdaIDs[ev.RequestContext.RequestID] = requestID
		return ev.RequestContext.RequestID
	}
	out.Reset() // start-up lines (JWKS fetch) belong to no invocation
	gatewayIDs := []string{invoke("apigw-tools-call-risk-review.json", "req-1"), invoke("apigw-tools-list.json", "req-2")}
	require.NotEqual(t, gatewayIDs[0], gatewayIDs[1])

	var lines, audits, colds int
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		var doc map[string]any
		if json.Unmarshal(line, &doc) != nil || doc["_aws"] != nil {
			continue // EMF documents are metrics, not log lines
		}
		lines++
		if doc["msg"] == "audit" {
			audits++
			gw, _ := doc["gateway_request_id"].(string)
			assert.Equal(t, lambdaIDs[gw], doc["request_id"], "one request id per request, in every audit record: %s", line)
		}
		assert.Equal(t, "intentgate-test-mcp", doc["function"], "%s", line)
		assert.Equal(t, traceID, doc["xray_trace_id"], "%s", line)
		assert.Contains(t, gatewayIDs, doc["gateway_request_id"], "%s", line)
		if doc["cold_start"] == true {
			colds++
			assert.Equal(t, gatewayIDs[0], doc["gateway_request_id"], "only the first invocation is the cold start: %s", line)
		}
		assert.Contains(t, doc, "cold_start", "%s", line)
	}
	assert.Positive(t, audits, "the tool call wrote audit records")
	assert.Positive(t, colds)
	assert.Greater(t, lines, audits-1)

	var coldMetrics int
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		if bytes.Contains(line, []byte(`"cold_starts":`)) {
			coldMetrics++
		}
	}
	assert.Equal(t, 1, coldMetrics, "one cold start per process")

	segments := readSegments(t, daemon, func(segs []map[string]any) bool {
		return hasSegment(segs, func(s map[string]any) bool { return s["name"] == "DynamoDB" }) &&
			hasSegment(segs, func(s map[string]any) bool { return s["annotations"] != nil })
	})
	assert.True(t, hasSegment(segments, func(s map[string]any) bool {
		aws, _ := s["aws"].(map[string]any)
		return s["name"] == "DynamoDB" && s["trace_id"] == traceID && aws["operation"] != nil
	}), "DynamoDB calls are subsegments of the invocation's trace")
	assert.True(t, hasSegment(segments, func(s map[string]any) bool {
		a, _ := s["annotations"].(map[string]any)
		return a["tool"] == "request_risk_review" && a["state"] == "SUCCEEDED" && a["outcome"] != nil
	}), "the request's subsegment is annotated with tool, state and outcome")
}

// readSegments collects X-Ray documents sent to the daemon socket until
// done says enough arrived (they are sent when each subsegment closes,
// before the handler returns) or the socket stays quiet.
func readSegments(t *testing.T, conn net.PacketConn, done func([]map[string]any) bool) []map[string]any {
	t.Helper()
	var segs []map[string]any
	buf := make([]byte, 64<<10)
	for !done(segs) {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			break
		}
		_, body, _ := strings.Cut(string(buf[:n]), "\n") // {"format":"json","version":1}\n<document>
		var seg map[string]any
		if json.Unmarshal([]byte(body), &seg) == nil {
			segs = append(segs, seg)
		}
	}
	return segs
}

func hasSegment(segs []map[string]any, match func(map[string]any) bool) bool {
	var walk func(map[string]any) bool
	walk = func(s map[string]any) bool {
		if match(s) {
			return true
		}
		subs, _ := s["subsegments"].([]any)
		for _, sub := range subs {
			if m, ok := sub.(map[string]any); ok && walk(m) {
				return true
			}
		}
		return false
	}
	for _, s := range segs {
		if walk(s) {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
