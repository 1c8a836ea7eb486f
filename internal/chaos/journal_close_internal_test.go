package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// The journal check holds a FAILED operation's closing to the rule the
// state machine applies (operation.Apply): only an effect reported after
// the failure can be closed.
func TestCheckerFlagsAFailedOperationClosedWithNothingReported(t *testing.T) {
	op, t0 := rejectedOperation(t)
	_, applyErr := op.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Second)})
	require.Error(t, applyErr, "Apply refuses it")
	forged := op
	forged.Journal = append(append([]operation.Event(nil), op.Journal...),
		operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Second), From: operation.StateFailed, To: operation.StateFailed})
	forged.Version++
	assert.NotEmpty(t, journalProblem(forged), "the checker should refuse what the state machine refuses")
}

// Evidence that names no effect reports nothing (operation.Apply takes it,
// and refuses a closing after it): the checker agrees.
func TestCheckerFlagsAClosingOfEvidenceThatNamesNothing(t *testing.T) {
	op, t0 := rejectedOperation(t)
	op, err := op.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(2 * time.Second)})
	require.NoError(t, err, "Apply takes evidence without an id")
	_, applyErr := op.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(3 * time.Second)})
	require.Error(t, applyErr, "Apply refuses the closing: nothing was reported")
	forged := op
	forged.Journal = append(append([]operation.Event(nil), op.Journal...),
		operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(3 * time.Second), From: operation.StateFailed, To: operation.StateFailed})
	forged.Version++
	assert.NotEmpty(t, journalProblem(forged))
}

// rejectedOperation is an operation FAILED by a business rejection, and
// the time it was created at.
func rejectedOperation(t *testing.T) (operation.Operation, time.Time) {
	t.Helper()
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	key, err := operation.NewRequestKey("c", "t", "u", "request_risk_review", "op-00000001")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "risk_review|O1|standard|g1", RequestDigest: "sha256:" + strings.Repeat("a", 64), TenantID: "t", EndUserID: "u",
		Target: map[string]string{"a": "b"}, Payload: map[string]string{"a": "b"}}, t0, time.Minute)
	require.NoError(t, err)
	op, err = op.Apply(operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
	require.NoError(t, err)
	return op, t0
}
