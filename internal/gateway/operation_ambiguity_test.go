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
	"github.com/intentgate/intentgate/internal/tools"
)

// voidTool is a second write family, like refundTool under another name.
type voidTool struct{ *refundTool }

func (voidTool) Name() string                      { return "void_charge" }
func (voidTool) Companions() []tools.OperationTool { return nil }

// refundAndVoidClient serves the two write tools through the gateway and
// connects one caller's MCP client to them.
func refundAndVoidClient(t *testing.T, refund *refundTool, void voidTool) *mcp.ClientSession {
	t.Helper()
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 2, MaxQueue: 2, MaxWait: time.Second})
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Config{Executor: ex, Writes: []tools.Published{refund, void}, Gate: gate})
	require.NoError(t, err)
	h, err := gw.Handler(mcpserver.Config{Name: "test", Version: "0"})
	require.NoError(t, err)
	subject := auth.Subject{ClientID: "finance-agent", UserID: "fiona", MerchantID: "M1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithSubject(r.Context(), subject)))
	}))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// An operation_id is scoped by tool, so one caller may use the same one with
// two write tools (a per-turn or per-ticket id): two operations. Reading
// "the operation" by that operation_id must then not silently answer with
// whichever tool's operation is looked at first: the caller following one
// write's next step (the deployment ticket's next_action is get_operation
// with its operation_id) would read another write's state, outcome and
// receipt. get_operation refuses the ambiguous id, naming each operation's
// handle to ask by (the product's next steps name operations by handle:
// TestANextStepNamesItsOperationByHandle).
func TestGetOperationByAnOperationIDUsedWithTwoToolsIsNotAnsweredWithTheWrongOne(t *testing.T) {
	refund, void := &refundTool{}, voidTool{&refundTool{}}
	cs := refundAndVoidClient(t, refund, void)

	const opID = "turn-0042-write"
	refunded := call(t, cs, "issue_refund", map[string]any{"charge_id": "ch_1", "operation_id": opID})
	require.False(t, refunded.IsError, answer(t, refunded))
	voided := call(t, cs, "void_charge", map[string]any{"charge_id": "ch_2", "operation_id": opID})
	require.False(t, voided.IsError, answer(t, voided))
	voidHandle := voided.StructuredContent.(map[string]any)["refund_handle"].(string)
	refundHandle := refunded.StructuredContent.(map[string]any)["refund_handle"].(string)
	require.NotEqual(t, voidHandle, refundHandle)

	got := call(t, cs, "get_operation", map[string]any{"operation_id": opID})
	require.True(t, got.IsError, "get_operation answered one of two operations silently: %s", answer(t, got))
	refusal := answer(t, got)
	assert.Contains(t, refusal, "INVALID_ARGUMENT")
	for _, h := range []string{refundHandle, voidHandle} {
		assert.Contains(t, refusal, h, "the refusal names each operation's handle, to ask again by")
		byHandle := call(t, cs, "get_operation", map[string]any{"handle": h})
		require.False(t, byHandle.IsError, answer(t, byHandle))
		assert.Equal(t, h, byHandle.StructuredContent.(map[string]any)["handle"])
	}
}

// A business key says "at most one live operation per business fact" of
// one kind of write. Two write tools are two kinds of fact, whatever
// strings their families derive (here both derive the refund's key): the
// store keeps each tool's business keys apart. A void of charge ch_9 is
// not a refund of ch_9: it is sent, never answered with the refund's
// operation.
func TestBusinessKeysOfTwoWriteToolsNeverCollide(t *testing.T) {
	refund, void := &refundTool{}, voidTool{&refundTool{}}
	cs := refundAndVoidClient(t, refund, void)

	refunded := call(t, cs, "issue_refund", map[string]any{"charge_id": "ch_9", "operation_id": "refund-ch9-0001"})
	require.False(t, refunded.IsError, answer(t, refunded))
	voided := call(t, cs, "void_charge", map[string]any{"charge_id": "ch_9", "operation_id": "void-ch9-0001"})
	require.False(t, voided.IsError, answer(t, voided))
	assert.NotEqual(t, refunded.StructuredContent.(map[string]any)["refund_handle"], voided.StructuredContent.(map[string]any)["refund_handle"],
		"void_charge was answered with issue_refund's operation")
	assert.Equal(t, int32(1), void.sent.Load(), "the void was never sent: deduplicated onto another tool's operation")
}
