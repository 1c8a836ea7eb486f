package release_test

import (
	"context"
	"github.com/intentgate/intentgate/internal/operation"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

var paymentsInput = provider.TicketInput{Service: "payments-api", Commit: "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", Environment: "production-eu", RequestedBy: "dev-alice"}

// probeAfter creates what setup creates at t0, records the dispatch as
// ended at t0+100ms, advances the clock by wait and probes.
func probeAfter(t *testing.T, env simEnv, api release.ReleaseAPI, wait time.Duration, setup func()) tools.ProbeResult {
	t.Helper()
	if setup != nil {
		setup()
	}
	op := unknownOp(t, paymentsTarget(), t0, t0.Add(100*time.Millisecond))
	env.clock.Advance(wait)
	res, err := release.New(api, grants, release.DefaultRecovery()).Probe(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, release.ProbeSource, res.Source)
	assert.Contains(t, res.Detail, "search service=payments-api commit=8bc911d0a3c4e5f60718293a4b5c6d7e8f901234 environment=production-eu: ")
	return res
}

func (e simEnv) create(t *testing.T) func() {
	return func() {
		_, err := e.client.CreateTicket(context.Background(), paymentsInput)
		require.NoError(t, err)
	}
}

// covered is the wait after which a lag-long index covers the dispatch
// that ended at t0+100ms.
func covered(lag time.Duration) time.Duration {
	return 100*time.Millisecond + release.CommitAllowance + lag
}

func TestProbeFindsOneConfirmedTicketOnceTheIndexCoversTheDispatch(t *testing.T) {
	env := newSim(t, 2*time.Second)
	res := probeAfter(t, env, env.client, covered(2*time.Second), env.create(t))
	assert.Equal(t, []string{"ticket-9001"}, res.Matches)
	assert.True(t, res.Authoritative)
	assert.Contains(t, res.Detail, "one_exact_match (indexed_through=")
	assert.Equal(t, 1, env.sim.Stats().GetCalls, "each hit is confirmed by the authoritative read")
}

func TestProbeProvesAbsenceOnlyWhenCovered(t *testing.T) {
	env := newSim(t, 2*time.Second)
	res := probeAfter(t, env, env.client, covered(2*time.Second), nil)
	assert.Empty(t, res.Matches)
	assert.True(t, res.Authoritative, "a complete index past the dispatch proves absence")
	assert.Contains(t, res.Detail, ": no_match (indexed_through=")
}

func TestProbeInsideTheLagWindowIsNotAuthoritative(t *testing.T) {
	env := newSim(t, time.Minute)
	res := probeAfter(t, env, env.client, 5*time.Second, env.create(t))
	assert.Empty(t, res.Matches, "the ticket exists but is not indexed yet")
	assert.False(t, res.Authoritative, "zero matches inside the lag window prove nothing")
	assert.Contains(t, res.Detail, "inconclusive: index lags dispatch")
}

func TestProbeWithHiddenResultsIsNotAuthoritative(t *testing.T) {
	env := newSim(t, 0)
	res := probeAfter(t, env, env.client, 5*time.Second, func() {
		env.create(t)()
		require.NoError(t, env.sim.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchHide, Times: 1}}}))
	})
	assert.Empty(t, res.Matches)
	assert.False(t, res.Authoritative)
	assert.Contains(t, res.Detail, "inconclusive: results hidden")
}

func TestProbeAfterDuplicateThenDropReportsBothTickets(t *testing.T) {
	env := newSim(t, 0)
	family := release.New(env.client, grants, release.DefaultRecovery())
	res := probeAfter(t, env, env.client, covered(0), func() {
		require.NoError(t, env.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}}))
		_, err := family.Dispatch(context.Background(), unknownOp(t, paymentsTarget(), t0, t0))
		assert.Equal(t, provider.ClassUnknown, provider.ClassOf(err))
	})
	assert.Equal(t, []string{"ticket-9001", "ticket-9002"}, res.Matches, "the reconciler must see both and escalate")
	assert.Contains(t, res.Detail, "multiple_exact_matches(2)")
}

// A provider that commits late in the dispatch: the watermark may already
// be past the dispatch start while the ticket is not indexed yet. Covering
// only LastDispatchAt would call that zero authoritative and allow a
// second ticket.
func TestProbeCoversTheWholeDispatchNotJustItsStart(t *testing.T) {
	const lag = 4 * time.Second
	env := newSim(t, lag)
	env.clock.Advance(2 * time.Second) // the provider commits 2s into the dispatch
	env.create(t)()
	op := unknownOp(t, paymentsTarget(), t0, t0.Add(2500*time.Millisecond))
	env.clock.Advance(3 * time.Second) // now t0+5s: watermark t0+1s
	family := release.New(env.client, grants, release.DefaultRecovery())

	naive, err := env.client.SearchTickets(context.Background(), provider.TicketTarget{Service: "payments-api", Commit: "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", Environment: "production-eu"})
	require.NoError(t, err)
	require.True(t, naive.Covers(op.LastDispatchAt), "the naive bound would trust this empty answer")
	require.Empty(t, naive.Tickets)

	res, err := family.Probe(context.Background(), op)
	require.NoError(t, err)
	assert.Empty(t, res.Matches)
	assert.False(t, res.Authoritative)
	assert.Equal(t, t0.Add(2500*time.Millisecond+release.CommitAllowance), release.CoverThrough(op))

	env.clock.Advance(2500*time.Millisecond + release.CommitAllowance)
	res, err = family.Probe(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, []string{"ticket-9001"}, res.Matches)
	assert.True(t, res.Authoritative)
}

func TestProbeDropsHitsTheAuthoritativeReadDenies(t *testing.T) {
	env := newSim(t, 0)
	denied := flakyAPI{ReleaseAPI: env.client, getErr: map[string]error{
		"ticket-9001": &provider.Error{Class: provider.ClassNotFound, Op: provider.OpGetTicket, StatusCode: 404},
	}}
	res := probeAfter(t, env, denied, covered(0), env.create(t))
	assert.Empty(t, res.Matches)
	assert.False(t, res.Authoritative, "a search hit the authoritative read denies makes the answer inconclusive")
	assert.Contains(t, res.Detail, "1 hit(s) denied by the authoritative read")
}

func TestProbeFailsWhenAHitCannotBeRead(t *testing.T) {
	env := newSim(t, 0)
	env.create(t)()
	env.create(t)()
	flaky := flakyAPI{ReleaseAPI: env.client, getErr: map[string]error{
		"ticket-9002": &provider.Error{Class: provider.ClassUnknown, Op: provider.OpGetTicket, StatusCode: 503},
	}}
	env.clock.Advance(covered(0))
	_, err := release.New(flaky, grants, release.DefaultRecovery()).Probe(context.Background(), unknownOp(t, paymentsTarget(), t0, t0.Add(100*time.Millisecond)))
	require.Error(t, err, "dropping an unreadable hit could hide the second ticket of an incident")
	assert.Equal(t, provider.ClassUnknown, provider.ClassOf(err))
}

func TestProbeWithSearchTimeoutFails(t *testing.T) {
	env := newSim(t, 0)
	require.NoError(t, env.sim.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchTimeout, Times: 1}}}))
	_, err := release.New(env.client, grants, release.DefaultRecovery()).Probe(context.Background(), unknownOp(t, paymentsTarget(), t0, t0))
	require.Error(t, err)
	assert.Equal(t, provider.ClassUnknown, provider.ClassOf(err))
}

func TestRecoveryForLagSettlesAfterTheLag(t *testing.T) {
	d := release.DefaultRecovery()
	assert.Equal(t, 5*time.Second, d.SettleWindow)
	assert.Equal(t, 6, d.ProbeBudget)
	assert.Equal(t, 10*time.Minute, d.MaxAge)
	assert.Equal(t, 1, d.RetryBudget)
	assert.False(t, d.IdempotentCreate)
	assert.Equal(t, d, release.RecoveryForLag(time.Second))
	long := release.RecoveryForLag(30 * time.Second)
	assert.Greater(t, long.SettleWindow, 30*time.Second+release.CommitAllowance)
}

// Journalled evidence (a stale dispatcher's verified ticket id) counts even
// before the index shows it; an id the authoritative read denies does not.
func TestProbeReadsBackTheTicketIDsTheJournalNames(t *testing.T) {
	env := newSim(t, time.Minute)
	env.create(t)() // ticket-9001, not indexed for a minute
	op := unknownOp(t, paymentsTarget(), t0, t0.Add(100*time.Millisecond))
	op, err := op.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Second), ResourceID: "ticket-9001"})
	require.NoError(t, err)
	op, err = op.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Second), ResourceID: "ticket-0404"})
	require.NoError(t, err)

	res, err := release.New(env.client, grants, release.DefaultRecovery()).Probe(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, []string{"ticket-9001"}, res.Matches)
	assert.False(t, res.Authoritative, "the index does not cover the dispatch yet")
	assert.Positive(t, res.ReadyIn, "says how far the index lags behind the horizon")
}
