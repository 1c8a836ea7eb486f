package tasks_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// A cancel that withdrew nothing did not happen to the operation: its
// audit record must not name the journal event client_cancelled, which is
// what the withdrawal's own transition record carries: an operator who
// looks for withdrawn operations by their event (as for every other
// transition) must not count refused cancels of operations that went on,
// and may still commit, as withdrawn.
func TestARefusedCancelsAuditRecordDoesNotNameTheWithdrawalEvent(t *testing.T) {
	st, _, ex, _, _ := aliceOnRefusedWrites(t)
	ctx := context.Background()
	kept, err := ex.Submit(ctx, refusedWrite{}, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-audit-evt01"}`), "")
	require.NoError(t, err)
	_, err = st.Transition(ctx, kept.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: kept.Operation.UpdatedAt, NextAt: kept.Operation.UpdatedAt, Source: "stale_dispatcher", ResourceID: "fact-1"})
	require.NoError(t, err)
	svc, _, audit := failingService(t, st, "none", false)

	d, err := svc.Cancel(ctx, svc.TaskID(kept))
	require.NoError(t, err)
	require.False(t, d.Withdrawn)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(audit.String())), &r))
	require.Equal(t, "not_withdrawn", r["outcome"])
	assert.NotEqual(t, string(operation.EventClientCancelled), r["event"],
		"the record of a refused cancel names the withdrawal's event: %v", r)
}
