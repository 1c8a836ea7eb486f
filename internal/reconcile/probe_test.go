package reconcile_test

import (
	"context"
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
	assert.Equal(t, 0, f.sim.Stats().LookupCalls)
}
