package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// A call refused because its target is held by an operation the caller may
// not see was told "nothing was sent"; its key was answered with a
// refusal, not with that operation. Once the holder has failed without
// effect (the fact is free again), the same call with the same key is a
// new intent like any refused call's retry: it is recorded and sent,
// instead of being refused forever as "already held by an operation you
// may not see; ask an operator" about a fact no one holds.
func TestAKeyRefusedForAnInvisibleHolderIsNotBoundToItAfterTheHolderFailed(t *testing.T) {
	w := newVisibilityWorld(t)
	ctx := context.Background()

	// alice@M1's refund of ch_shared is in flight.
	key, err := operation.NewRequestKey(aliceM1.ClientID, aliceM1.MerchantID, aliceM1.UserID, "issue_refund", "alice-op-held1")
	require.NoError(t, err)
	digest, err := operation.RequestDigest("issue_refund", aliceM1.UserID, map[string]string{"charge_id": "ch_shared"})
	require.NoError(t, err)
	held, err := operation.New(operation.Intent{Key: key, BusinessKey: "refund|ch_shared", RequestDigest: digest,
		EndUserID: aliceM1.UserID, TenantID: aliceM1.MerchantID, Target: map[string]string{"charge_id": "ch_shared"},
		Payload: map[string]string{"charge_id": "ch_shared"}}, time.Now(), time.Minute)
	require.NoError(t, err)
	_, err = w.store.InsertIfAbsent(ctx, held)
	require.NoError(t, err)

	bob := w.as(t, bobM2)
	args := map[string]any{"charge_id": "ch_shared", "operation_id": "bob-op-000001"}
	refused := call(t, bob, "issue_refund", args)
	require.True(t, refused.IsError)
	require.Contains(t, answer(t, refused), "PRECONDITION_FAILED", "the control: held by an operation bob may not see")

	// alice's refund is rejected by the provider: FAILED, the fact released.
	_, err = w.store.Transition(ctx, held, operation.Event{Type: operation.EventBusinessRejected, At: time.Now(), Detail: "rejected"})
	require.NoError(t, err)

	again := call(t, bob, "issue_refund", args)
	assert.False(t, again.IsError, "bob's key stays bound to a failed operation he never saw: %s", answer(t, again))
	assert.Equal(t, int32(1), w.refund.sent.Load(), "bob's refund was never sent")
}
