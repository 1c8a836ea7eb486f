package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/operation"
)

// escalatedRefund stores alice@M1's refund operation whose create timed out
// and whose probes ran out: ESCALATED, nothing recorded about the effect.
func (w *visibilityWorld) escalatedRefund(t *testing.T) operation.Operation {
	t.Helper()
	ctx := context.Background()
	key, err := operation.NewRequestKey(aliceM1.ClientID, aliceM1.MerchantID, aliceM1.UserID, "issue_refund", "alice-escalated-1")
	require.NoError(t, err)
	target := map[string]string{"charge_id": "ch_escalated"}
	bk, err := operation.NewBusinessKey("refund", "ch_escalated")
	require.NoError(t, err)
	digest, err := operation.RequestDigest("issue_refund", aliceM1.UserID, target)
	require.NoError(t, err)
	now := time.Now()
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: aliceM1.UserID,
		TenantID: aliceM1.MerchantID, Target: target, Payload: target}, now, time.Minute)
	require.NoError(t, err)
	_, err = w.store.InsertIfAbsent(ctx, op)
	require.NoError(t, err)
	for _, ev := range []operation.Event{
		{Type: operation.EventClientTimeout, At: now.Add(time.Second)},
		{Type: operation.EventProbeBudgetExhausted, At: now.Add(2 * time.Second), Source: "reconciler"},
	} {
		op, err = w.store.Transition(ctx, op, ev)
		require.NoError(t, err)
	}
	require.Equal(t, operation.StateEscalated, op.State)
	return op
}

// The refund family has no read by id: its probe (a lookup by request key
// that finds re_1) is what confirms an operator's SUCCEEDED.
func TestOperatorResolutionOfAFamilyWithoutReadByIDIsCheckedByItsProbe(t *testing.T) {
	w := newVisibilityWorld(t)
	op := w.escalatedRefund(t)
	operator := w.as(t, auth.Subject{ClientID: "ops-console", UserID: "oscar", MerchantID: "ops", Roles: []string{"operator"}})

	res := call(t, operator, "resolve_operation", map[string]any{"handle": op.Handle, "resolution": "SUCCEEDED",
		"evidence": "refund re_9 in the ledger", "resource_id": "re_9"})
	assert.True(t, res.IsError)
	assert.Contains(t, answer(t, res), "PRECONDITION_FAILED")
	assert.Contains(t, answer(t, res), "does not confirm re_9")

	res = call(t, operator, "resolve_operation", map[string]any{"handle": op.Handle, "resolution": "FAILED", "evidence": "no refund"})
	assert.True(t, res.IsError, "the probe finds re_1: FAILED would release the charge")
	assert.Contains(t, answer(t, res), "still shows effects")

	res = call(t, operator, "resolve_operation", map[string]any{"handle": op.Handle, "resolution": "SUCCEEDED",
		"evidence": "refund re_1 in the ledger", "resource_id": "re_1"})
	require.False(t, res.IsError, answer(t, res))
	assert.Contains(t, answer(t, res), `"effect_receipt":"receipt-`)
	assert.Equal(t, int32(0), w.refund.sent.Load(), "resolving never sends")
}
