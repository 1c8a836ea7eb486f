package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/stack"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

const resource = "https://intentgate.test/mcp"

// slowMachineStoreBudget replaces the 300 ms production store budget: on a
// loaded shared machine the local engine answers slower than that, and
// these tests measure behaviour, not latency.
const slowMachineStoreBudget = "3s"

// TestRecordedEventsThroughTheRealHandler feeds every API Gateway sample in
// events/ to the function's real handler: the adapter in front of the whole
// wired application, on the local engine with the simulators.
func TestRecordedEventsThroughTheRealHandler(t *testing.T) {
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{
		EngineEndpoint: engine.Endpoint(), Table: enginetest.TableName(t), MCPAddrs: []string{"127.0.0.1:0"},
		ResourceURL: resource, Out: &strings.Builder{},
		Env: map[string]string{"INTENTGATE_BUDGET_STORE": slowMachineStoreBudget},
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

	cases := []struct {
		file   string
		status int
		body   string // a fragment the response body must contain
	}{
		{"apigw-tools-list.json", http.StatusOK, `"name":"request_risk_review"`},
		{"apigw-tools-call-risk-review.json", http.StatusOK, `"status":"SUCCEEDED"`},
		// Same operation_id as the call above but another reason: refused.
		{"apigw-tools-call-base64-body.json", http.StatusOK, `"code":"IDEMPOTENCY_CONFLICT"`},
		{"apigw-tools-call-duplicate-param-header.json", http.StatusOK, `"review_id":"op_`},
		{"apigw-initialize-legacy.json", http.StatusOK, `"protocolVersion":"2025-06-18"`},
		{"apigw-oauth-protected-resource.json", http.StatusOK, `"resource":"` + resource + `"`},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			ev := loadEvent(t, tc.file, token)
			lctx, cancel := context.WithTimeout(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-" + tc.file}), 20*time.Second)
			defer cancel()
			resp, err := handle(lctx, ev)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, resp.Body)
			assert.Contains(t, resp.Body, tc.body)
			if ev.RawPath == "/mcp" {
				assert.Equal(t, "req-"+tc.file, resp.Headers["X-Request-Id"], "the Lambda request id is the request id")
			}
		})
	}
	assert.Equal(t, 1, s.Risk.Stats().CreateCalls, "the tools/call samples share one operation_id: one create, one replay, one conflict")
	assert.False(t, s.Risk.Stats().ForeignAuthorizationSeen)
}

// loadEvent reads a sample and swaps its placeholder bearer for a real token.
func loadEvent(t *testing.T, name, token string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	require.NoError(t, err)
	var ev events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	for k := range ev.Headers {
		if strings.EqualFold(k, "authorization") {
			ev.Headers[k] = "Bearer " + token
		}
	}
	return ev
}
