package rie

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

const tasksExtension = "io.modelcontextprotocol/tasks"

// taskEvent is the sample tools/call event turned into method/name with
// params, opted in to MCP Tasks in its own client capabilities.
func taskEvent(t *testing.T, method, name, orderID string, params map[string]any) []byte {
	t.Helper()
	var ev map[string]any
	require.NoError(t, json.Unmarshal(sample(t, "apigw-tools-call-risk-review.json"), &ev))
	headers := ev["headers"].(map[string]any)
	headers["mcp-method"], headers["mcp-name"] = method, name
	delete(headers, "mcp-param-order-id")
	if orderID != "" {
		headers["mcp-param-order-id"] = orderID
	}
	params["_meta"] = map[string]any{
		metaProtocolVersion:    "2026-07-28",
		metaClientInfo:         map[string]any{"name": "tasks-agent", "version": "1"},
		metaClientCapabilities: map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	require.NoError(t, err)
	ev["body"] = string(body)
	headers["content-length"] = strconv.Itoa(len(body))
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	return out
}

type eventTask struct {
	ResultType     string         `json:"resultType"`
	TaskID         string         `json:"taskId"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage"`
	PollIntervalMs int64          `json:"pollIntervalMs"`
	Result         map[string]any `json:"result"`
}

// Item: through the Lambda adapter under the emulator, a dropped response
// is answered with a task created on one function instance and polled on
// another until completed with the verified result; a foreign tenant's
// tasks/get is refused exactly like an unknown id.
func TestDroppedResponseIsATaskPolledOnAnotherFunctionInstance(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	env := sys.functionEnv("intentgate-mcp")
	env["INTENTGATE_TASK_ID_KEY"] = strings.Repeat("t", 40)
	first := startEmulator(t, b.emulator, b.mcp, env)
	second := startEmulator(t, b.emulator, b.mcp, env)
	mint := func(sub, merchant string) string {
		tok, err := sys.issuer.Mint(issuer.Claims{Subject: sub, ClientID: "support-assistant", MerchantID: merchant, Audience: resourceURL, TTL: time.Hour})
		require.NoError(t, err)
		return tok
	}
	alice, bob := mint("alice", "M1"), mint("bob", "M2")
	require.NoError(t, sys.risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))

	call := taskEvent(t, "tools/call", "request_risk_review", "O20260728046", map[string]any{"name": "request_risk_review",
		"arguments": map[string]any{"order_id": "O20260728046", "reason": "dropped", "operation_id": "op-rie-task-01"}})
	resp := invokeHTTP(t, first, withBearer(t, call, alice))
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", resp.Body)
	var created eventTask
	require.NoError(t, json.Unmarshal(rpcResult(t, resp), &created))
	require.Equal(t, "task", created.ResultType, "%+v", created)
	require.Equal(t, "working", created.Status)

	get := func(em *emulator, token string, id string) events.APIGatewayV2HTTPResponse {
		return invokeHTTP(t, em, withBearer(t, taskEvent(t, "tasks/get", id, "", map[string]any{"taskId": id}), token))
	}
	reconciler, err := sys.app.Reconciler()
	require.NoError(t, err)
	// Poll the other instance as a client would, honouring pollIntervalMs,
	// with a reconciler sweep between polls; bounded by the test context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var polled eventTask
	for polled.Status != "completed" {
		r := get(second, alice, created.TaskID)
		require.Equal(t, http.StatusOK, r.StatusCode, "body: %s", r.Body)
		require.NoError(t, json.Unmarshal(rpcResult(t, r), &polled))
		require.Contains(t, []string{"working", "completed"}, polled.Status)
		if polled.Status == "completed" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task still %s: %s", polled.Status, polled.StatusMessage)
		case <-time.After(time.Duration(min(polled.PollIntervalMs, 500)) * time.Millisecond):
		}
		_, err := reconciler.Sweep(ctx)
		require.NoError(t, err)
	}
	sc, _ := polled.Result["structuredContent"].(map[string]any)
	assert.Equal(t, "SUCCEEDED", sc["status"])
	assert.Equal(t, "committed_and_verified", sc["outcome"])
	assert.Equal(t, 1, sys.risk.Stats().ReviewsCommitted)

	foreign := get(second, bob, created.TaskID)
	unknown := get(second, bob, "tsk_"+strings.Repeat("a", 26)+"_"+strings.Repeat("b", 26))
	assert.Equal(t, unknown.StatusCode, foreign.StatusCode)
	assert.JSONEq(t, unknown.Body, foreign.Body, "not visible and not existing are indistinguishable")
	assert.Contains(t, foreign.Body, "-32602")

	assertStopsClean(t, first)
	assertStopsClean(t, second)
}
