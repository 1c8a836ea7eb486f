package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

// A single-dispatch timeout whose create committed (one ticket, nobody
// else's) is found by a probe only after several searches the provider
// hid, each spending the probe budget. Its duplicate audit has a budget of
// its own: one hidden search at audit time does not escalate an operation
// with exactly one ticket to the operator.
func TestATicketFoundAfterHiddenSearchesKeepsAWholeBudgetForItsAudit(t *testing.T) {
	for _, hiddenProbes := range []int{1, 2, 3, 4} {
		t.Run("", func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: time.Second})
			op := f.submitWithFault(t, releaseapi.CreateDropResponseAfterCommit, 0)
			require.Equal(t, operation.StateUnknown, op.State)
			require.Equal(t, 1, f.tickets())
			ctx := context.Background()
			step := func(hide bool) operation.Operation {
				t.Helper()
				var faults releaseapi.Faults
				if hide {
					faults.Search = []releaseapi.SearchFault{{Mode: releaseapi.SearchHide, Times: 1}}
				}
				require.NoError(t, f.sim.SetFaults(faults))
				cur := f.get(t, op.Handle)
				if now := f.at(f.reconciler)(); cur.DueAt.After(now) {
					f.base.Advance(cur.DueAt.Sub(now))
				}
				_, err := f.recon.Reconcile(ctx, cur)
				require.NoError(t, err)
				return f.get(t, op.Handle)
			}
			for i := 0; i < hiddenProbes; i++ {
				op = step(true)
				require.Equal(t, operation.StateUnknown, op.State, "hidden search %d", i+1)
			}
			op = step(false)
			require.Equal(t, operation.StateSucceeded, op.State, "journal: %+v", op.Journal)
			require.True(t, op.AuditPending())
			// The audit is due; the provider hides this one search too,
			// then behaves.
			op = step(true)
			for op.NeedsReconciliation() {
				op = step(false)
			}
			t.Logf("hidden probes %d: final %s after %d searches; events %v", hiddenProbes, op.State, op.ProbeCount, lastEvent(op).Type)
			assert.Equal(t, 1, f.tickets(), "one ticket, nobody else's")
			assert.Equal(t, operation.StateSucceeded, op.State,
				"one ticket and one hidden audit search: escalated (%s)", op.Escalation)
		})
	}
}

// With clocks apart within the bound (the reconciler ahead of the
// provider), a plain timeout after a commit settles SUCCEEDED, its probe
// and its audit each needing at most a search more for the skew.
func TestATicketFoundByAProbeSettlesWhateverTheClocksWithinTheBound(t *testing.T) {
	for _, ahead := range []time.Duration{0, 3 * time.Second, 6 * time.Second, 9 * time.Second} {
		t.Run(ahead.String(), func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second, clocks: clocks{reconciler: ahead}})
			op := f.submitWithFault(t, releaseapi.CreateDropResponseAfterCommit, 0)
			require.Equal(t, operation.StateUnknown, op.State)
			got := f.drive(t, op.Handle)
			var probes, audits int
			for _, ev := range got.Journal {
				switch ev.Type {
				case operation.EventProbeFoundOne, operation.EventProbeInconclusive:
					probes++
				case operation.EventAuditClean, operation.EventAuditDeferred, operation.EventAuditExhausted:
					audits++
				}
			}
			t.Logf("reconciler ahead %s: %s, %d probe searches, %d audit searches (budget %d)", ahead, got.State, probes, audits, f.fam.Recovery().ProbeBudget)
			assert.Equal(t, operation.StateSucceeded, got.State)
		})
	}
}

// A probe that finds the very ticket the journal already names as this
// operation's own (a create answered but not verified, or a stale
// dispatcher's evidence) leaves no create of its own to come: it settles
// without a duplicate audit.
func TestAProbeThatFindsTheTicketTheJournalNamesAsItsOwnSchedulesNoAudit(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.submitWithFault(t, releaseapi.CreateDropResponseAfterCommit, 0)
	require.Equal(t, operation.StateUnknown, op.State)
	ctx := context.Background()
	f.base.Advance(time.Minute)
	found, err := f.fam.Probe(ctx, op)
	require.NoError(t, err)
	require.Len(t, found.Matches, 1)
	op, err = f.disp.Transition(ctx, op.Key.Tool, op, operation.Event{Type: operation.EventEvidenceRecorded, At: f.at(f.reconciler)(),
		Source: "stale_dispatcher", ResourceID: found.Matches[0], Detail: "the create's answer named it"}, nil)
	require.NoError(t, err)

	_, err = f.recon.Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	got := f.get(t, op.Handle)
	require.Equal(t, operation.StateSucceeded, got.State, "journal: %+v", got.Journal)
	assert.False(t, got.AuditPending(), "journal: %+v", got.Journal)
}
