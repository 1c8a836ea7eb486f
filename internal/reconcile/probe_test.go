package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/tools"
)

// stubProbe is the real family with a canned lookup answer, for evidence the
// Risk API simulator cannot produce (it dedupes by key and is authoritative).
type stubProbe struct {
	tools.WriteTool
	result tools.ProbeResult
}

func (s stubProbe) Probe(context.Context, operation.Operation) (tools.ProbeResult, error) {
	return s.result, nil
}

func TestTwoMatchingEffectsEscalateAsAnIncidentWithoutChoosing(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t, stubProbe{WriteTool: f.family, result: tools.ProbeResult{
		Matches: []string{"rv-000001", "rv-000002"}, Authoritative: true, Source: "risk_provider",
	}})
	op := f.toUnknown(t, f.storedOp(t, "op-multiple-001", orderID(11), time.Minute))
	f.clock.Advance(riskreviewSettle)

	res, err := svc.Reconcile(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, operation.EventProbeMultiple, res.Event)
	got := f.get(t, op.Handle)
	assert.Equal(t, operation.StateEscalated, got.State)
	assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
	assert.Equal(t, 2, got.DuplicateResources)
	assert.Empty(t, got.ResourceID, "nobody guesses which to keep")
	assert.Empty(t, got.Receipt)
	ev := lastEvent(got)
	assert.Equal(t, reconcile.ResultMultipleMatches, ev.Result)
	assert.Contains(t, ev.Detail, "rv-000001, rv-000002")
	assert.Contains(t, ev.Detail, "escalated to risk-oncall")
}

func TestZeroMatchesWithoutProofStayUnknown(t *testing.T) {
	cases := []struct {
		name          string
		authoritative bool
		advance       time.Duration
		wantDue       time.Duration // after now
	}{
		{"non-authoritative after the settle window", false, time.Minute, time.Second},
		{"authoritative inside the settle window", true, 500 * time.Millisecond, riskreviewSettle - 500*time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			svc := f.service(t, stubProbe{WriteTool: f.family, result: tools.ProbeResult{Authoritative: tc.authoritative, Source: "search"}})
			op := f.toUnknown(t, f.storedOp(t, "op-zeromatch-01", orderID(12), time.Minute))
			f.clock.Advance(tc.advance)

			res, err := svc.Reconcile(context.Background(), op)
			require.NoError(t, err)
			assert.Equal(t, operation.EventProbeInconclusive, res.Event)
			got := f.get(t, op.Handle)
			assert.Equal(t, operation.StateUnknown, got.State)
			assert.Equal(t, operation.OutcomeVerificationInconclusive, got.Outcome)
			assert.Equal(t, tc.wantDue, got.DueAt.Sub(f.clock.Now()))
			assert.Equal(t, reconcile.ResultNotFoundUnproven, lastEvent(got).Result)
		})
	}
}

func TestUnknownOlderThanMaxAgeEscalates(t *testing.T) {
	f := newFixture(t, withRecovery(func(r *tools.Recovery) { r.MaxAge = 10 * time.Minute }))
	op := f.toUnknown(t, f.storedOp(t, "op-maxage-0001", orderID(13), time.Minute))
	f.clock.Advance(11 * time.Minute)
	res, err := f.service(t).Reconcile(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, operation.EventProbeBudgetExhausted, res.Event)
	assert.Contains(t, f.get(t, op.Handle).Escalation, "escalated to risk-oncall: outcome unknown for 11m0s")
	assert.Equal(t, 1, f.sim.Stats().LookupCalls, "one last look before a human is asked")
}

// A reconciler that was down past an operation's max age still looks once
// before it pages a human: evidence that decides the operation wins over
// its age, so a duplicate is escalated as the incident it is, naming every
// effect, and a single verified effect needs no human at all.
func TestUnknownOlderThanMaxAgeIsDecidedByDecisiveEvidence(t *testing.T) {
	cases := []struct {
		name         string
		result       tools.ProbeResult
		wantEvent    operation.EventType
		wantState    operation.State
		wantInDetail string
	}{
		{"two effects: an incident naming both",
			tools.ProbeResult{Matches: []string{"rv-000001", "rv-000002"}, Authoritative: true, Source: "risk_provider"},
			operation.EventProbeMultiple, operation.StateEscalated, "rv-000001, rv-000002"},
		{"one verified effect: succeeded",
			tools.ProbeResult{Matches: []string{"rv-000003"}, Authoritative: true, Source: "risk_provider"},
			operation.EventProbeFoundOne, operation.StateSucceeded, ""},
		{"authoritative absence: escalated, never re-sent this late",
			tools.ProbeResult{Authoritative: true, Source: "risk_provider"},
			operation.EventProbeBudgetExhausted, operation.StateEscalated, "outcome unknown for 11m0s"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withRecovery(func(r *tools.Recovery) { r.MaxAge = 10 * time.Minute }))
			svc := f.service(t, stubProbe{WriteTool: f.family, result: tc.result})
			op := f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-maxage-evid-%d", i), orderID(40+i), time.Minute))
			f.clock.Advance(11 * time.Minute)

			res, err := svc.Reconcile(context.Background(), op)
			require.NoError(t, err)
			assert.Equal(t, tc.wantEvent, res.Event)
			got := f.get(t, op.Handle)
			assert.Equal(t, tc.wantState, got.State)
			if tc.wantInDetail != "" {
				assert.Contains(t, lastEvent(got).Detail, tc.wantInDetail)
			}
		})
	}
}

// One match from a lookup that may hide others (not authoritative) is not
// "exactly one": it proves the effect exists, not that it is the only one,
// so nothing is settled on it and nobody gets a receipt.
func TestOneMatchFromANonAuthoritativeLookupIsNotExactlyOne(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t, stubProbe{WriteTool: f.family, result: tools.ProbeResult{
		Matches: []string{"rv-000001"}, Authoritative: false, Source: "search",
	}})
	op := f.toUnknown(t, f.storedOp(t, "op-onehidden-01", orderID(14), time.Minute))
	f.clock.Advance(riskreviewSettle)

	res, err := svc.Reconcile(context.Background(), op)
	require.NoError(t, err)
	assert.NotEqual(t, operation.EventProbeFoundOne, res.Event)
	got := f.get(t, op.Handle)
	assert.NotEqual(t, operation.StateSucceeded, got.State, "settled on a match that may not be the only one")
	assert.Empty(t, got.Receipt)
}

// A PENDING operation's lease is its dispatcher's clock, which may be
// behind the reconciler's by up to the skew bound: the lease is expired
// (dispatcher_lost) only once it has surely ended on every clock, never
// while the dispatcher may still be inside it.
func TestALeaseIsExpiredOnlyOnceItHasEndedOnEveryClockWithinTheSkewBound(t *testing.T) {
	const skew = 5 * time.Second
	f := newFixture(t, withClockSkewBound(skew))
	svc := f.service(t)
	op := f.storedOp(t, "op-leaseskew-01", orderID(15), 10*time.Second)

	f.clock.Advance(op.DueAt.Sub(f.clock.Now()) + skew - time.Millisecond)
	res, err := svc.Reconcile(context.Background(), op)
	require.NoError(t, err)
	assert.True(t, res.Skipped, "the lease may not have ended on the dispatcher's clock: %+v", res)
	assert.Equal(t, operation.StatePending, f.get(t, op.Handle).State)

	f.clock.Advance(2 * time.Millisecond)
	res, err = svc.Reconcile(context.Background(), op)
	require.NoError(t, err)
	assert.False(t, res.Skipped, "past the lease and the skew bound: %+v", res)
	assert.NotEqual(t, operation.StatePending, f.get(t, op.Handle).State)
}
