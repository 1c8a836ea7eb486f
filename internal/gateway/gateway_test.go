package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/schemacheck"
	"github.com/intentgate/intentgate/internal/tools"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// refundTool is a third write tool, written the way the README's "Adding a
// write tool" says: one type implementing tools.Published, nothing in the
// gateway.
type refundTool struct {
	sent atomic.Int32
	// dispatching, when set, is told of every dispatch, which then waits
	// for release: a provider call held in flight.
	dispatching chan struct{}
	release     chan struct{}
}

func (r *refundTool) Name() string { return "issue_refund" }
func (r *refundTool) Recovery() tools.Recovery {
	return tools.Recovery{SettleWindow: time.Second, ProbeBudget: 3, MaxAge: time.Hour, RetryBudget: 1, IdempotentCreate: true}
}
func (r *refundTool) Prepare(_ context.Context, _ tools.Caller, raw json.RawMessage) (tools.Prepared, error) {
	var a struct {
		Charge      string `json:"charge_id"`
		OperationID string `json:"operation_id"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
	}
	bk, err := operation.NewBusinessKey("refund", a.Charge)
	if err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
	}
	return tools.Prepared{OperationID: a.OperationID, BusinessKey: bk, Target: map[string]string{"charge_id": a.Charge},
		Payload: map[string]string{"charge_id": a.Charge}, DigestArgs: map[string]string{"charge_id": a.Charge}}, nil
}
func (r *refundTool) Authorize(context.Context, tools.Caller, tools.Prepared) error { return nil }
func (r *refundTool) Dispatch(context.Context, operation.Operation) (tools.Effect, error) {
	r.sent.Add(1)
	if r.dispatching != nil {
		r.dispatching <- struct{}{}
		<-r.release
	}
	return tools.Effect{ResourceID: "re_1"}, nil
}
func (r *refundTool) Verify(context.Context, operation.Operation, tools.Effect) error { return nil }
func (r *refundTool) Probe(context.Context, operation.Operation) (tools.ProbeResult, error) {
	return tools.ProbeResult{Matches: []string{"re_1"}, Authoritative: true}, nil
}
func (r *refundTool) Spec() tools.ToolSpec {
	return tools.ToolSpec{Title: "Issue a refund", Description: "Refund a charge exactly once.",
		InputSchema: `{"type":"object","additionalProperties":false,"properties":{"charge_id":{"type":"string","minLength":3},
			"operation_id":{"type":"string","minLength":8,"maxLength":128}},"required":["charge_id"]}`,
		OutputSchema: `{"type":"object","properties":{"refund_handle":{"type":"string"},"status":{"type":"string"}}}`, OpenWorld: true}
}
func (r *refundTool) Render(_ tools.Caller, sub tools.Submission) tools.Rendered {
	v := tools.ViewOf(sub.Operation, "get_operation", "handle")
	return tools.Rendered{Body: map[string]any{"refund_handle": sub.Operation.Handle, "status": string(sub.Operation.State)},
		IsError: v.IsError, Code: v.Code}
}

// Companions publishes the refund family's status query the way the
// built-in families publish theirs: nothing about it is in the gateway.
func (r *refundTool) Companions() []tools.OperationTool {
	return []tools.OperationTool{{
		Name: "get_refund_status", Title: "Refund status", Description: "A refund's status by its handle.",
		InputSchema: `{"type":"object","additionalProperties":false,"properties":{"refund_handle":{"type":"string","pattern":"^op_[a-z2-7]{26}$"}},
			"required":["refund_handle"]}`,
		OutputSchema: `{"type":"object","properties":{"refund_handle":{"type":"string"},"status":{"type":"string"}}}`,
		Kind:         tools.Reads, HandleArg: "refund_handle", Of: r.Name(),
		Serve: func(_ context.Context, c tools.Caller, op operation.Operation, _ json.RawMessage) (tools.Rendered, error) {
			return tools.Rendered{Body: map[string]any{"refund_handle": op.Handle, "status": string(op.State)}}, nil
		},
	}}
}

// serveRefunds serves a gateway with the refund tool on loopback, every
// request as fiona (finance-agent, merchant M1).
func serveRefunds(t *testing.T, ex *tools.Executor, gate *admission.Gate, refund *refundTool) *httptest.Server {
	t.Helper()
	gw, err := gateway.New(gateway.Config{Executor: ex, Writes: []tools.Published{refund}, Gate: gate})
	require.NoError(t, err)
	h, err := gw.Handler(mcpserver.Config{Name: "test", Version: "0"})
	require.NoError(t, err)
	subject := auth.Subject{ClientID: "finance-agent", UserID: "fiona", MerchantID: "M1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithSubject(r.Context(), subject)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAThirdWriteToolNeedsNoGatewayCode(t *testing.T) {
	srv, refund := refundsOnLoopback(t)

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	names := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		names[tool.Name] = tool
	}
	require.Contains(t, names, "issue_refund")
	assert.Contains(t, names, "get_operation", "the shared operation tools come with it")
	assert.True(t, names["issue_refund"].Annotations.IdempotentHint)

	args := map[string]any{"charge_id": "ch_123", "operation_id": "refund-op-0001"}
	for range 2 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		require.NoError(t, err)
		assert.False(t, res.IsError)
		assert.Contains(t, string(mustJSON(t, res.StructuredContent)), `"status":"SUCCEEDED"`)
	}
	assert.Equal(t, int32(1), refund.sent.Load(), "exactly once, with no line of gateway code for this tool")

	require.Contains(t, names, "get_refund_status", "the family's companion is listed with it")
	assert.True(t, names["get_refund_status"].Annotations.ReadOnlyHint)
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
	require.NoError(t, err)
	handle := first.StructuredContent.(map[string]any)["refund_handle"].(string)
	status, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_refund_status", Arguments: map[string]any{"refund_handle": handle}})
	require.NoError(t, err)
	assert.False(t, status.IsError, string(mustJSON(t, status.StructuredContent)))
	assert.JSONEq(t, `{"refund_handle":"`+handle+`","status":"SUCCEEDED"}`, string(mustJSON(t, status.StructuredContent)))

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"charge_id": "ch_123", "extra": 1}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "its schema is enforced like every tool's")
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Every business code, as the gateway answers it, conforms to every tool's
// advertised outputSchema (checked with an independent validator): the
// MCP server's error envelope lists the codes the gateway registers, and
// the codes the server answers with itself are the same words.
func TestEveryBusinessCodeConformsToEveryAdvertisedOutputSchema(t *testing.T) {
	assert.Equal(t, string(tools.CodeInvalidArgument), mcpserver.CodeInvalidArgument)
	assert.Equal(t, string(tools.CodeOperationUnknown), mcpserver.CodeOperationUnknown)

	w := newVisibilityWorld(t)
	list, err := w.as(t, aliceM1).ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.NotEmpty(t, list.Tools)
	for _, tool := range list.Tools {
		schema, err := schemacheck.Compile(tool.OutputSchema)
		require.NoError(t, err, tool.Name)
		for _, code := range tools.AllCodes() {
			body := mcpserver.BusinessError(string(code), "m", false, &mcpserver.NextAction{Hint: "h"}).StructuredContent
			assert.NoError(t, schema.Validate(body), "%s %s", tool.Name, code)
		}
		if tool.Name == "get_operation" { // a closed schema of its own: only the envelope admits an error body
			assert.Error(t, schema.Validate(map[string]any{"code": "NO_SUCH_CODE", "message": "m", "retry_allowed": false}))
		}
	}
}

// A JSON-RPC batch (protocol 2025-03-26, no version header) is one HTTP
// request holding several calls, which the SDK runs concurrently: each
// write still takes its own slot of the admission gate, so under Lambda's
// gate of one with no queue, the second write of a batch is answered
// OVERLOADED while the first is at the provider, as a second request
// would be.
func TestEachWriteInABatchPassesTheAdmissionGateLikeASingleCall(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 1, MaxQueue: 0, MaxWait: time.Second})
	require.NoError(t, err)
	refund := &refundTool{dispatching: make(chan struct{}, 2), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(refund.release) }) }
	t.Cleanup(release)
	srv := serveRefunds(t, ex, gate, refund)

	call := func(id int, charge string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"issue_refund","arguments":{"charge_id":%q}}}`, id, charge)
	}
	body := "[" + call(1, "ch_batch_1") + "," + call(2, "ch_batch_2") + "]"
	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		if err != nil {
			done <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		done <- answer{status: resp.StatusCode, body: data, err: err}
	}()

	<-refund.dispatching // one write holds the gate's only slot, at the provider
	require.Eventually(t, func() bool { return gate.Stats().Rejected == 1 }, 5*time.Second, 10*time.Millisecond,
		"the batch's other write is refused by the gate")
	release()
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	var msgs []struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(got.body, &msgs), "%s", got.body)
	require.Len(t, msgs, 2)
	var statuses []string
	for _, m := range msgs {
		sc := m.Result.StructuredContent
		if code, ok := sc["code"].(string); ok {
			statuses = append(statuses, code)
		} else {
			statuses = append(statuses, fmt.Sprint(sc["status"]))
		}
	}
	assert.ElementsMatch(t, []string{"SUCCEEDED", string(tools.CodeOverloaded)}, statuses, "%s", got.body)
	assert.Equal(t, int32(1), refund.sent.Load(), "one write reached the provider")
}
