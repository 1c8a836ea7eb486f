package gateway_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
)

// An operator follows a caller's write by hashing the operation_id the
// caller reports (obs.OperationHash). A call answered from another
// operation (deduplicated by business key, or a replay of a key bound that
// way) is recorded under that operation's hash; without the caller's own,
// the hash of the key the caller reports would match no record at all.
func TestACallAnsweredFromAnotherOperationIsAuditedUnderTheCallersOwnKeyToo(t *testing.T) {
	w := newVisibilityWorld(t)
	w.aliceRefund(t)
	// alice again under a new operation_id: deduplicated onto her own refund.
	res := call(t, w.as(t, aliceM1), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0002"})
	require.False(t, res.IsError, answer(t, res))
	// bob, who may not see it: refused; and his replay of the key now bound.
	for range 2 {
		res = call(t, w.as(t, bobM2), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000001"})
		require.True(t, res.IsError)
	}

	recs := auditRecords(t, w.audit)
	require.Len(t, recs, 4, "one record per call")
	first := recs[0]
	assert.Equal(t, refundKeyHash(t, aliceM1, "alice-op-0001"), first["operation_hash"])
	assert.NotContains(t, first, "caller_operation_hash", "a call answered by its own operation names one key")
	for i, want := range []string{refundKeyHash(t, aliceM1, "alice-op-0002"), refundKeyHash(t, bobM2, "bob-op-00000001"), refundKeyHash(t, bobM2, "bob-op-00000001")} {
		rec := recs[i+1]
		assert.Equal(t, first["operation_hash"], rec["operation_hash"], "call %d: the operation that answered", i+1)
		assert.Equal(t, want, rec["caller_operation_hash"], "call %d: the key the caller sent", i+1)
		assert.Equal(t, true, rec["deduplicated"], "call %d", i+1)
	}
}

// A call refused once its key was formed names that key
// (caller_operation_hash) and, when the refusal is about an operation
// already under it (IDEMPOTENCY_CONFLICT), that operation (operation_hash):
// the key's own, or the holder the key is bound to. A refusal before any
// operation is known to exist under the key (an unknown outcome) names no
// operation: operation_hash never names one that may not exist.
func TestACallRefusedAfterItsKeyWasFormedIsAuditedUnderThatKey(t *testing.T) {
	w := newVisibilityWorld(t)
	w.aliceRefund(t)
	alice := w.as(t, aliceM1)
	// Bound to alice-op-0001's refund by its business key.
	res := call(t, alice, "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0002"})
	require.False(t, res.IsError, answer(t, res))

	for _, opID := range []string{"alice-op-0001", "alice-op-0002"} {
		conflict := call(t, alice, "issue_refund", map[string]any{"charge_id": "ch_other", "operation_id": opID})
		require.Contains(t, answer(t, conflict), "IDEMPOTENCY_CONFLICT")
	}

	w.calls.mu.Lock()
	w.calls.fail = func(op string) error {
		if op == "TransactWriteItems" {
			return errors.New("connection reset by peer")
		}
		return nil
	}
	w.calls.mu.Unlock()
	unknown := call(t, alice, "issue_refund", map[string]any{"charge_id": "ch_third", "operation_id": "alice-op-0003"})
	require.Contains(t, answer(t, unknown), "TEMPORARY_UNAVAILABLE")

	recs := auditRecords(t, w.audit)
	require.Len(t, recs, 5, "one record per call")
	first, ownConflict, boundConflict, unknownRec := recs[0], recs[2], recs[3], recs[4]
	for name, rec := range map[string]map[string]any{"own key": ownConflict, "bound key": boundConflict} {
		assert.Equal(t, "IDEMPOTENCY_CONFLICT", rec["code"], name)
		assert.Equal(t, refundKeyHash(t, aliceM1, "alice-op-0001"), rec["operation_hash"], "%s: the operation already under the key", name)
		assert.NotEmpty(t, rec["argument_digest"], name)
		assert.NotEqual(t, first["argument_digest"], rec["argument_digest"], "%s: the conflicting call's own digest", name)
	}
	assert.NotContains(t, ownConflict, "caller_operation_hash", "the key's own operation: one key")
	assert.Equal(t, refundKeyHash(t, aliceM1, "alice-op-0002"), boundConflict["caller_operation_hash"], "the key the caller sent")

	assert.Equal(t, "TEMPORARY_UNAVAILABLE", unknownRec["code"])
	assert.NotContains(t, unknownRec, "operation_hash", "no operation is known to exist under the key")
	assert.Equal(t, refundKeyHash(t, aliceM1, "alice-op-0003"), unknownRec["caller_operation_hash"])
	assert.NotEmpty(t, unknownRec["argument_digest"])
}

// The visible replay of a bound key (alice's own second key) is answered
// from the operation it is bound to, and names its own key as well.
func TestTheReplayOfAKeyBoundToAVisibleOperationNamesTheKey(t *testing.T) {
	w := newVisibilityWorld(t)
	w.aliceRefund(t)
	alice := w.as(t, aliceM1)
	for range 2 {
		res := call(t, alice, "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0002"})
		require.False(t, res.IsError, answer(t, res))
	}
	recs := auditRecords(t, w.audit)
	require.Len(t, recs, 3)
	for _, rec := range recs[1:] {
		assert.Equal(t, recs[0]["operation_hash"], rec["operation_hash"])
		assert.Equal(t, refundKeyHash(t, aliceM1, "alice-op-0002"), rec["caller_operation_hash"])
	}
}

// refundKeyHash is the operation_hash of s's issue_refund key opID: what
// an operator computes from the operation_id a caller reports.
func refundKeyHash(t *testing.T, s auth.Subject, opID string) string {
	t.Helper()
	k, err := operation.NewRequestKey(s.ClientID, s.MerchantID, s.UserID, "issue_refund", opID)
	require.NoError(t, err)
	return obs.OperationHash(k)
}

// A call's audit record names the handle of the operation it is about,
// which get_operation takes: an alarm or a log search leads to the
// operation without reading the table.
func TestACallsAuditRecordNamesTheHandleOfItsOperation(t *testing.T) {
	w := newVisibilityWorld(t)
	handle := w.aliceRefund(t)
	res := call(t, w.as(t, aliceM1), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0002"})
	require.False(t, res.IsError, answer(t, res))

	recs := auditRecords(t, w.audit)
	require.Len(t, recs, 2)
	assert.Equal(t, handle, recs[0]["handle"], "the call's own operation")
	assert.Equal(t, handle, recs[1]["handle"], "the operation a deduplicated call was answered with")
}
