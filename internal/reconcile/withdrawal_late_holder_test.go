package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// The withdrawal's audit reports the late ticket A and ends while nobody
// holds the fact. A next request then times out, and its probe takes A as
// its own, while its own create B (breaking its promise by less than the
// grace) lands afterwards. The withdrawal's audit is over; the holder made
// one dispatch. A ticket found by search may be another request's while
// the holder's own create may still be to come, so the holder audits its
// fact past its own horizon and grace, and B is reported.
func TestAHolderThatAdoptsATicketFoundBySearchAuditsItsFactPastItsOwnGrace(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)
	w := f.drive(t, withdrawn.Handle)
	require.Len(t, w.EffectsReportedAfterFailure(), 1, "journal: %+v", w.Journal)
	require.False(t, w.NeedsReconciliation(), "the withdrawal's audit ended")

	next := f.submitLate(t, "deploy-payments-again", 8*time.Second)
	require.Equal(t, operation.StateUnknown, next.State)
	w, h := f.sweepTogether(t, withdrawn.Handle, next.Handle)

	require.Equal(t, 2, f.tickets(), "both creates committed late")
	require.True(t, journalHas(h, "probe_found_one"), "the holder adopted the reported ticket: %+v", h.Journal)
	require.Equal(t, w.EffectsReportedAfterFailure()[0], h.ResourceID)
	reported := len(w.EffectsReportedAfterFailure()) + h.DuplicateResources
	assert.Greater(t, reported, 1, "the holder's own late ticket is reported somewhere\nwithdrawn: %+v\nholder: %+v", w.Journal, h.Journal)
}
