package rie

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

// taskEventV1 is the sample event as a 2025-11-25 client sends a request
// after initialize: the version in the header, no per-request _meta.
func taskEventV1(t *testing.T, method string, params map[string]any) []byte {
	t.Helper()
	var ev map[string]any
	require.NoError(t, json.Unmarshal(sample(t, "apigw-tools-call-risk-review.json"), &ev))
	headers := ev["headers"].(map[string]any)
	for _, h := range []string{"mcp-method", "mcp-name", "mcp-param-order-id"} {
		delete(headers, h)
	}
	headers["mcp-protocol-version"] = "2025-11-25"
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	require.NoError(t, err)
	ev["body"] = string(body)
	headers["content-length"] = strconv.Itoa(len(body))
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	return out
}

// The experimental Tasks of 2025-11-25 through the Lambda adapter under the
// emulator: the tools/call "task" parameter survives the adapter, the task
// created on one instance is polled on another until completed, and
// tasks/result returns the verified result.
func TestOlderClientsTaskThroughTheAdapterOnAnotherFunctionInstance(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	env := sys.functionEnv("intentgate-mcp")
	env["INTENTGATE_TASK_ID_KEY"] = strings.Repeat("t", 40)
	first := startEmulator(t, b.emulator, b.mcp, env)
	second := startEmulator(t, b.emulator, b.mcp, env)
	alice, err := sys.issuer.Mint(issuer.Claims{Subject: "alice", ClientID: "support-assistant", MerchantID: "M1", Audience: resourceURL, TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, sys.risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))

	resp := invokeHTTP(t, first, withBearer(t, taskEventV1(t, "tools/call", map[string]any{"name": "request_risk_review",
		"arguments": map[string]any{"order_id": "O20260728047", "reason": "dropped", "operation_id": "op-rie-taskv1-1"}, "task": map[string]any{}}), alice))
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", resp.Body)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal(rpcResult(t, resp), &created))
	require.Equal(t, "working", created.Task.Status, "body: %s", resp.Body)

	reconciler, err := sys.app.Reconciler()
	require.NoError(t, err)
	var polled struct {
		Status       string `json:"status"`
		PollInterval int64  `json:"pollInterval"`
	}
	// Poll the other instance with a sweep between polls; bounded by count.
	for i := 0; i < 60 && polled.Status != "completed"; i++ {
		r := invokeHTTP(t, second, withBearer(t, taskEventV1(t, "tasks/get", map[string]any{"taskId": created.Task.TaskID}), alice))
		require.Equal(t, http.StatusOK, r.StatusCode, "body: %s", r.Body)
		require.NoError(t, json.Unmarshal(rpcResult(t, r), &polled))
		require.Contains(t, []string{"working", "completed"}, polled.Status)
		if polled.Status != "completed" {
			time.Sleep(time.Duration(min(polled.PollInterval, 500)) * time.Millisecond)
			_, err := reconciler.Sweep(t.Context())
			require.NoError(t, err)
		}
	}
	require.Equal(t, "completed", polled.Status)

	r := invokeHTTP(t, second, withBearer(t, taskEventV1(t, "tasks/result", map[string]any{"taskId": created.Task.TaskID}), alice))
	require.Equal(t, http.StatusOK, r.StatusCode, "body: %s", r.Body)
	var result struct {
		Meta              map[string]any `json:"_meta"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(rpcResult(t, r), &result))
	assert.Equal(t, "committed_and_verified", result.StructuredContent["outcome"])
	assert.Equal(t, map[string]any{"taskId": created.Task.TaskID}, result.Meta["io.modelcontextprotocol/related-task"])
	assert.Equal(t, 1, sys.risk.Stats().ReviewsCommitted)

	assertStopsClean(t, first)
	assertStopsClean(t, second)
}
