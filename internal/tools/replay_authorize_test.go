package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// A replay of a recorded operation (same key, same arguments) is answered
// from the record when its authorization cannot pass now: the ownership
// lookup failing (the very provider outage that leaves operations UNKNOWN)
// or a grant withdrawn since. The operation exists and was, or is being,
// sent: a refusal saying "nothing was sent" would be false. Who may see
// the answer is the visibility rule's decision, applied where the answer
// is rendered, as for every other replay.
func TestAReplayIsAnsweredFromTheRecordWhenItsAuthorizationFailsNow(t *testing.T) {
	for name, refusal := range map[string]error{
		"the ownership lookup is down": tools.Fail(tools.CodeTemporaryUnavailable, true, nil, "order ownership could not be checked; nothing was sent; retry shortly"),
		"the grant was withdrawn":      tools.Fail(tools.CodeForbidden, false, nil, "not allowed; nothing was sent"),
	} {
		t.Run(name, func(t *testing.T) {
			ex, _, _ := newExecutor(t, smallBudget())
			tool := &scripted{dispatchErr: context.DeadlineExceeded} // the first attempt ends UNKNOWN
			args := json.RawMessage(`{"fact":"f1","operation_id":"op-replay-authz-01"}`)
			first, err := ex.Submit(context.Background(), tool, alice, args, "")
			require.NoError(t, err)
			require.Equal(t, operation.StateUnknown, first.Operation.State)

			tool.authorize = refusal
			again, err := ex.Submit(context.Background(), tool, alice, args, "")
			require.NoError(t, err, "the replay must be the recorded operation's answer, not a refusal saying nothing was sent")
			assert.True(t, again.Replayed)
			assert.Equal(t, first.Operation.Handle, again.Operation.Handle)
			assert.Equal(t, operation.StateUnknown, again.Operation.State)
			assert.Equal(t, int32(1), tool.dispatches.Load(), "a replay sends nothing")
			assert.Equal(t, tools.ErrorClassAuthorizationRefused, again.ErrorClass, "the audit record says the authorization refused")
		})
	}
}

// The same holds for a key first answered by deduplication: it replays the
// holder it is bound to.
func TestADeduplicatedReplayIsAnsweredFromItsBindingWhenItsAuthorizationFailsNow(t *testing.T) {
	ex, _, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	_, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f2","operation_id":"op-holder-0001"}`), "")
	require.NoError(t, err)
	second := json.RawMessage(`{"fact":"f2","operation_id":"op-second-0001"}`)
	dedup, err := ex.Submit(context.Background(), tool, alice, second, "")
	require.NoError(t, err)
	require.True(t, dedup.Deduplicated)

	tool.authorize = tools.Fail(tools.CodeTemporaryUnavailable, true, nil, "ownership could not be checked; nothing was sent")
	again, err := ex.Submit(context.Background(), tool, alice, second, "")
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.True(t, again.Deduplicated)
	assert.Equal(t, dedup.Operation.Handle, again.Operation.Handle)
	assert.Equal(t, int32(1), tool.dispatches.Load())
}

// Everything that is not a replay of a recorded operation keeps the
// authorization's refusal, and the refusal records nothing: a key never
// used, and a key used before with other arguments (a conflict is not this
// caller's answer while the write could not be authorized anyway).
func TestARequestThatIsNoReplayKeepsItsAuthorizationRefusalAndRecordsNothing(t *testing.T) {
	ex, st, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	_, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f3","operation_id":"op-used-000001"}`), "")
	require.NoError(t, err)

	refusal := tools.Fail(tools.CodeForbidden, false, nil, "not allowed; nothing was sent")
	tool.authorize = refusal
	_, err = ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f4","operation_id":"op-fresh-00001"}`), "")
	require.ErrorIs(t, err, refusal)
	key, kerr := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, tool.Name(), "op-fresh-00001")
	require.NoError(t, kerr)
	_, gerr := st.GetByKey(context.Background(), key)
	assert.True(t, errors.Is(gerr, store.ErrNotFound), "a refused request records nothing")

	_, err = ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f5","operation_id":"op-used-000001"}`), "")
	require.ErrorIs(t, err, refusal)
	assert.Equal(t, int32(1), tool.dispatches.Load())
}
