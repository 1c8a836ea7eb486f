package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A caller who may not see the operation holding its target learns nothing
// of that operation, not even whether it is still in flight: the refusal
// comes at once, without the wait (and the store reads) a replay of one's
// own in-flight operation gets. Waiting would make the answer's timing a
// side channel on someone else's provider call. Bob's first call is
// deduplicated onto alice's refund (by its business key) and binds his key
// to it; his replay of that key follows the binding. Each costs the same
// store calls, and gets the same answer, while alice's refund is at the
// provider as after it has settled.
func TestATargetHeldByAnInvisibleInFlightOperationIsRefusedWithoutWaiting(t *testing.T) {
	w := newVisibilityWorld(t)
	w.refund.dispatching = make(chan struct{}, 1)
	w.refund.release = make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(w.refund.release) }) }
	t.Cleanup(release)

	alice, bob := w.as(t, aliceM1), w.as(t, bobM2)
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

	first := map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000001"}
	dedup := refusalWhileHeld(t, w, bob, first, release)
	replay := refusalWhileHeld(t, w, bob, first, release)
	for _, r := range []refusal{dedup, replay} {
		require.NoError(t, r.err)
		assert.True(t, r.whileHeld, "the refusal waited for alice's in-flight provider call")
		assert.True(t, r.res.IsError, answer(t, r.res))
		assert.Contains(t, answer(t, r.res), `"PRECONDITION_FAILED"`)
	}
	assert.Equal(t, answer(t, dedup.res), answer(t, replay.res))

	release()
	res := <-aliceDone
	assert.False(t, res.IsError, "alice's own refund is unaffected: %s", answer(t, res))
	assert.Equal(t, int32(1), w.refund.sent.Load(), "one refund sent")

	// Once alice's refund has settled: a new key of bob's, and the replay
	// of the bound one, cost what they cost while it was in flight.
	var settledDedup, settledReplay *mcp.CallToolResult
	dedupCalls := w.calls.during(func() {
		settledDedup = call(t, bob, "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000002"})
	})
	replayCalls := w.calls.during(func() { settledReplay = call(t, bob, "issue_refund", first) })
	assert.Equal(t, answer(t, settledDedup), answer(t, dedup.res), "in flight and settled are one answer")
	assert.Equal(t, answer(t, settledReplay), answer(t, replay.res), "in flight and settled are one answer")
	assert.Equal(t, opsOf(dedupCalls), opsOf(dedup.calls), "a deduplicated call costs the same store calls in flight and settled")
	assert.Equal(t, opsOf(replayCalls), opsOf(replay.calls), "a bound replay costs the same store calls in flight and settled")
}

// refusal is one call's answer and the store calls it made.
type refusal struct {
	res       *mcp.CallToolResult
	err       error
	calls     []storeCall
	whileHeld bool // answered while alice's refund was still held
}

// refusalWhileHeld sends args as cs while alice's refund is held at the
// provider. Not a timing assertion: on a gateway that waits for the holder
// the answer would come only when the holder settles, so after a while the
// refund is released (release) and the call is marked as not answered
// while held; the exact store calls are compared by the caller.
func refusalWhileHeld(t *testing.T, w *visibilityWorld, cs *mcp.ClientSession, args map[string]any, release func()) refusal {
	t.Helper()
	done := make(chan refusal, 1)
	go func() {
		var r refusal
		r.calls = w.calls.during(func() {
			r.res, r.err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		})
		done <- r
	}()
	select {
	case r := <-done:
		r.whileHeld = true
		return r
	case <-time.After(3 * time.Second):
		release()
		return <-done
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
// operation that holds the target, so an operator can join the two, carries
// the caller's own request digest, and none of the holder's state or
// outcome as if it were the caller's.
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
	for _, k := range []string{"status", "outcome"} {
		assert.NotContains(t, bobRec, k, "the holder's %s is not the refused call's", k)
	}
	assert.NotEmpty(t, bobRec["argument_digest"])
	assert.NotEqual(t, aliceRec["argument_digest"], bobRec["argument_digest"], "the digest is bob's own request's")
}
