package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

// A caller who may not see the operation holding its target learns nothing
// of that operation, not even whether it is still in flight: the refusal
// comes at once, without the wait (and the store reads) a replay of one's
// own in-flight operation gets. Waiting would make the answer's timing a
// side channel on someone else's provider call.
func TestATargetHeldByAnInvisibleInFlightOperationIsRefusedWithoutWaiting(t *testing.T) {
	carolM1 := auth.Subject{ClientID: "shared-agent", UserID: "carol", MerchantID: "M1"}
	for _, tc := range []struct {
		name        string
		who         auth.Subject
		first, next map[string]any
		code        string
	}{
		{"another tenant's call on the same charge (deduplicated by business key)", bobM2,
			map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000001"},
			map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000002"}, "PRECONDITION_FAILED"},
		// The request digest covers the end user, so a colleague's call
		// with alice's key is another request under a used key.
		{"a colleague on the same client and tenant sending alice's operation_id", carolM1,
			map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0001"},
			map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0001"}, "IDEMPOTENCY_CONFLICT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedWhileHeld(t, tc.who, tc.first, tc.next, tc.code)
		})
	}
}

// refusedWhileHeld holds alice's refund at the provider, sends first as who,
// then, once alice's refund has settled, next: both must be refused alike
// with code, the first without waiting for alice.
func refusedWhileHeld(t *testing.T, who auth.Subject, first, next map[string]any, code string) {
	w := newVisibilityWorld(t)
	w.refund.dispatching = make(chan struct{}, 1)
	w.refund.release = make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(w.refund.release) }) }
	t.Cleanup(release)

	alice, other := w.as(t, aliceM1), w.as(t, who)
	aliceDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund",
			Arguments: map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0001"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		aliceDone <- res
	}()
	<-w.refund.dispatching // alice's refund is at the provider, PENDING in the store

	type refusal struct {
		res   *mcp.CallToolResult
		err   error
		calls []storeCall
	}
	refused := make(chan refusal, 1)
	go func() {
		var a refusal
		a.calls = w.calls.during(func() {
			a.res, a.err = other.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: first})
		})
		refused <- a
	}()

	// Not a timing assertion: alice's call is held until the other caller
	// is answered, or (on a gateway that waits for the holder) long enough
	// to see that the answer depended on alice's call finishing.
	var held refusal
	answeredWhileHeld := true
	select {
	case held = <-refused:
	case <-time.After(5 * time.Second):
		answeredWhileHeld = false
		release()
		held = <-refused
	}
	require.NoError(t, held.err)
	assert.True(t, answeredWhileHeld, "the refusal waited for alice's in-flight provider call")
	assert.True(t, held.res.IsError, answer(t, held.res))
	assert.Contains(t, answer(t, held.res), `"`+code+`"`)

	release()
	res := <-aliceDone
	assert.False(t, res.IsError, "alice's own refund is unaffected: %s", answer(t, res))
	assert.Equal(t, int32(1), w.refund.sent.Load(), "one refund sent")

	// Once alice's refund has settled: the same answer at the same store
	// cost, so neither tells the other caller where alice's call is.
	var settled *mcp.CallToolResult
	settledCalls := w.calls.during(func() { settled = call(t, other, "issue_refund", next) })
	assert.Equal(t, answer(t, settled), answer(t, held.res), "in flight and settled are one answer")
	if first["operation_id"] != next["operation_id"] {
		assert.Equal(t, opsOf(settledCalls), opsOf(held.calls), "in flight and settled cost the same store calls")
	}
}

func opsOf(calls []storeCall) []string {
	ops := make([]string, len(calls))
	for i, c := range calls {
		ops[i] = c.Op
	}
	return ops
}

// The audit record of a refused call is the refused caller's: it names the
// operation that holds the target, so an operator can join the two, and
// carries none of that operation's state or outcome as if it were the
// caller's own.
func TestTheAuditRecordOfARefusalByAnInvisibleHolderIsTheRefusedCallers(t *testing.T) {
	w := newVisibilityWorld(t)
	w.aliceRefund(t)
	res := call(t, w.as(t, bobM2), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000001"})
	require.True(t, res.IsError)

	recs := auditRecords(t, w.audit)
	require.Len(t, recs, 2, "one record per call")
	aliceRec, bobRec := recs[0], recs[1]
	assert.Equal(t, "bob", bobRec["end_user_principal"])
	assert.Equal(t, "M2", bobRec["tenant"])
	assert.Equal(t, "PRECONDITION_FAILED", bobRec["code"])
	assert.Equal(t, true, bobRec["deduplicated"], "answered from an existing operation")
	assert.Equal(t, aliceRec["operation_hash"], bobRec["operation_hash"], "the holder is named, by hash, for the operator")
	assert.Equal(t, aliceRec["business_key"], bobRec["business_key"])
	for _, k := range []string{"status", "outcome", "argument_digest"} {
		assert.NotContains(t, bobRec, k, "the holder's %s is not the refused call's", k)
	}
}
