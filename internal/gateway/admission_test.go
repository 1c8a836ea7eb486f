package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// panickingRefund is the refund family with a defect in its dispatch.
type panickingRefund struct{ *refundTool }

func (panickingRefund) Dispatch(context.Context, operation.Operation) (tools.Effect, error) {
	panic("defect in a family's dispatch")
}

// The MCP server recovers a tool handler's panic and keeps serving, so a
// slot the call held must come back: otherwise every such panic shrinks
// the instance's capacity for good, and under Lambda's gate of one a
// single one answers every later write OVERLOADED until the instance is
// recycled.
func TestAPanickingWriteGivesItsAdmissionSlotBack(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 1, MaxQueue: 0, MaxWait: time.Second})
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Config{Executor: ex, Writes: []tools.Published{panickingRefund{&refundTool{}}}, Gate: gate})
	require.NoError(t, err)
	h, err := gw.Handler(mcpserver.Config{Name: "test", Version: "0"})
	require.NoError(t, err)
	subject := auth.Subject{ClientID: "finance-agent", UserID: "fiona", MerchantID: "M1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithSubject(r.Context(), subject)))
	}))
	t.Cleanup(srv.Close)

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund",
		Arguments: map[string]any{"charge_id": "ch_panic_1", "operation_id": "refund-panic-0001"}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "the panic is answered, not propagated")
	assert.Zero(t, gate.Stats().InFlight, "the panicking call's slot was released")

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund",
		Arguments: map[string]any{"charge_id": "ch_panic_2", "operation_id": "refund-panic-0002"}})
	require.NoError(t, err)
	assert.NotContains(t, string(mustJSON(t, res.StructuredContent)), string(tools.CodeOverloaded),
		"the next write is admitted")
}
