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
	keyHash := func(s auth.Subject, opID string) string {
		t.Helper()
		k, err := operation.NewRequestKey(s.ClientID, s.MerchantID, "issue_refund", opID)
		require.NoError(t, err)
		return obs.OperationHash(k)
	}
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
	assert.Equal(t, keyHash(aliceM1, "alice-op-0001"), first["operation_hash"])
	assert.NotContains(t, first, "caller_operation_hash", "a call answered by its own operation names one key")
	for i, want := range []string{keyHash(aliceM1, "alice-op-0002"), keyHash(bobM2, "bob-op-00000001"), keyHash(bobM2, "bob-op-00000001")} {
		rec := recs[i+1]
		assert.Equal(t, first["operation_hash"], rec["operation_hash"], "call %d: the operation that answered", i+1)
		assert.Equal(t, want, rec["caller_operation_hash"], "call %d: the key the caller sent", i+1)
		assert.Equal(t, true, rec["deduplicated"], "call %d", i+1)
	}
}

// A call refused once its key was known is about that key: an
// IDEMPOTENCY_CONFLICT about the operation already under it, an unknown
// outcome about the operation that may now exist. Its record carries the
// key's hash, so the operator who hashes the caller's operation_id finds it
// beside that operation's own records.
func TestACallRefusedAfterItsKeyWasKnownIsAuditedUnderThatKey(t *testing.T) {
	keyHash := func(opID string) string {
		t.Helper()
		k, err := operation.NewRequestKey(aliceM1.ClientID, aliceM1.MerchantID, "issue_refund", opID)
		require.NoError(t, err)
		return obs.OperationHash(k)
	}
	w := newVisibilityWorld(t)
	w.aliceRefund(t)
	alice := w.as(t, aliceM1)

	conflict := call(t, alice, "issue_refund", map[string]any{"charge_id": "ch_other", "operation_id": "alice-op-0001"})
	require.Contains(t, answer(t, conflict), "IDEMPOTENCY_CONFLICT")

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
	require.Len(t, recs, 3, "one record per call")
	first := recs[0]
	assert.Equal(t, keyHash("alice-op-0001"), recs[1]["operation_hash"], "the conflict is about the operation under the key")
	assert.Equal(t, "IDEMPOTENCY_CONFLICT", recs[1]["code"])
	assert.NotEmpty(t, recs[1]["argument_digest"])
	assert.NotEqual(t, first["argument_digest"], recs[1]["argument_digest"], "the conflicting call's own digest")
	assert.Equal(t, keyHash("alice-op-0003"), recs[2]["operation_hash"], "the operation that may have been recorded")
	assert.Equal(t, "TEMPORARY_UNAVAILABLE", recs[2]["code"])
	for _, rec := range recs[1:] {
		assert.NotContains(t, rec, "caller_operation_hash", "one key")
	}
}
