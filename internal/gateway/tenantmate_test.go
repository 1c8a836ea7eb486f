package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

// Two end users of one tenant on one shared client never share a request:
// the request digest binds the end user, so the same operation_id from
// another subject can never be a replay, only a conflict. A key space
// shared by the tenant's subjects therefore gives nothing but a way for
// one user to pre-empt another's operation_id (IDEMPOTENCY_CONFLICT on a
// key the victim never used) and to learn which operation_ids a
// tenant-mate has used, although a tenant-mate without a grant may not
// see those operations at all. Each subject's operation_id names its own
// operation.
func TestATenantMatesOperationIDNeitherBlocksNorRevealsAnothersKey(t *testing.T) {
	w := newVisibilityWorld(t)
	carolM1 := auth.Subject{ClientID: "shared-agent", UserID: "carol", MerchantID: "M1"}

	// carol uses an operation_id first (say, the README's predictable form).
	res := call(t, w.as(t, carolM1), "issue_refund", map[string]any{"charge_id": "ch_carol", "operation_id": "refund-op-0001"})
	require.False(t, res.IsError, answer(t, res))

	// alice, in the same tenant on the same client, picks the same id for
	// her own, unrelated refund.
	res = call(t, w.as(t, aliceM1), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "refund-op-0001"})
	assert.False(t, res.IsError, "alice's own call is refused because a tenant-mate used the key: %s", answer(t, res))
	assert.NotContains(t, answer(t, res), "IDEMPOTENCY_CONFLICT")
	assert.Equal(t, int32(2), w.refund.sent.Load(), "alice's refund was never sent")
}
