package releaseapi_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

func TestCreatePastItsCommitDeadlineIsRefusedAndCommitsNothing(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	in := payments
	in.CommitDeadline = f.clock.Now().Add(-time.Millisecond)

	_, err := f.client.CreateTicket(context.Background(), in)

	var pe *provider.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, provider.ClassNotDispatched, pe.Class, "the provider kept its promise: proven no effect")
	assert.Equal(t, provider.CodeCommitDeadlinePassed, pe.Code)
	assert.Equal(t, 0, f.sim.Stats().TicketsCommitted)
	assert.Equal(t, 1, f.sim.Stats().CreatesPastDeadline)
}

func TestCreateAtItsCommitDeadlineCommits(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	in := payments
	in.CommitDeadline = f.clock.Now()
	ticket, err := f.client.CreateTicket(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", ticket.TicketID)
}

// lateCommit holds one create under mode until the client gives up, then
// returns the deadline it carried.
func lateCommit(t *testing.T, f fixture, mode releaseapi.CreateMode, overrunMS int) time.Time {
	t.Helper()
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: mode, Times: 1}}, LateCommitOverrunMS: overrunMS}))
	in := payments
	in.CommitDeadline = f.clock.Now().Add(10 * time.Second)
	_, err := f.client.CreateTicket(context.Background(), in)
	assert.Equal(t, provider.ClassUnknown, provider.ClassOf(err), "the caller's wait ends without an answer")
	assert.Equal(t, 0, f.sim.Stats().TicketsCommitted, "nothing is committed while the caller waits")
	return in.CommitDeadline
}

func TestCommitLateWithinDeadlineCommitsAtTheDeadlineAndIsIndexedByIt(t *testing.T) {
	f := newFixture(t, 2*time.Second, 200*time.Millisecond)
	deadline := lateCommit(t, f, releaseapi.CreateCommitLateWithinDeadline, 0)

	f.clock.Advance(10*time.Second - time.Millisecond)
	assert.Equal(t, 0, f.sim.Stats().TicketsCommitted, "not before the deadline")
	f.clock.Advance(time.Millisecond)
	assert.Equal(t, 1, f.sim.Stats().TicketsCommitted, "at the deadline, the latest instant the promise allows")

	f.clock.Advance(2 * time.Second) // the index lag
	found, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.True(t, found.Covers(deadline), "a watermark past the deadline ...")
	require.Len(t, found.Tickets, 1, "... sees every create that may commit")
	assert.Equal(t, deadline, found.Tickets[0].CreatedAt)
	assert.Equal(t, f.clock.Now(), found.SearchedAt, "the answer carries the provider's clock")
}

func TestCommitLateBeyondDeadlineBreaksThePromiseByTheOverrun(t *testing.T) {
	f := newFixture(t, 0, 200*time.Millisecond)
	deadline := lateCommit(t, f, releaseapi.CreateCommitLateBeyondDeadline, 3000)

	f.clock.Advance(10 * time.Second)
	found, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.True(t, found.Covers(deadline))
	assert.Empty(t, found.Tickets, "absence looks proven ...")

	f.clock.Advance(3 * time.Second)
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.Len(t, found.Tickets, 1, "... until the promise-breaking commit lands")
	assert.Equal(t, deadline.Add(3*time.Second), found.Tickets[0].CreatedAt)
}

func TestCommitLateWithoutADeadlineCommitsAfterTheFixedDelay(t *testing.T) {
	f := newFixture(t, 0, 200*time.Millisecond)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateWithinDeadline, Times: 1}}}))
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.Error(t, err)
	f.clock.Advance(releaseapi.LateCommitDelay)
	assert.Equal(t, 1, f.sim.Stats().TicketsCommitted, "a provider without a promise commits whenever it likes")
}

func TestNegativeLateCommitOverrunIsRefused(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	assert.Error(t, f.sim.SetFaults(releaseapi.Faults{LateCommitOverrunMS: -1}))
}

// The latency fault keeps working after the client gave up; with a commit
// deadline it can no longer commit after it (real clock: the pause alone
// outlasts the deadline).
func TestLatencyCannotCommitPastTheDeadline(t *testing.T) {
	sim := releaseapi.New(releaseapi.Config{APIKey: testKey})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: server.URL, APIKey: testKey, MaxConns: 1, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, sim.SetFaults(releaseapi.Faults{LatencyMS: 300}))
	in := payments
	in.CommitDeadline = time.Now().Add(50 * time.Millisecond)

	_, err = client.CreateTicket(context.Background(), in)

	assert.Equal(t, provider.CodeCommitDeadlinePassed, func() string {
		var pe *provider.Error
		require.ErrorAs(t, err, &pe)
		return pe.Code
	}())
	assert.Equal(t, 0, sim.Stats().TicketsCommitted)
}

// commit_on_resend is the broken promise the duplicate audit exists for,
// at the worst moment: the held create stays invisible through every
// search (absence looks proven), and commits just after the re-send for
// the same target has made its own ticket. It counts as a broken promise
// once it lands past its deadline.
func TestCommitOnResendCommitsTheHeldCreateJustAfterTheNextCreateForItsTarget(t *testing.T) {
	f := newFixture(t, 0, 200*time.Millisecond)
	deadline := lateCommit(t, f, releaseapi.CreateCommitOnResend, 0)

	f.clock.Advance(time.Minute)
	found, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.True(t, found.Covers(deadline))
	assert.Empty(t, found.Tickets, "absence looks proven")

	resent, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err, "the re-send is answered with its own ticket")
	stats := f.sim.Stats()
	assert.Equal(t, 2, stats.TicketsByTarget[paymentsTarget], "and the held create lands right after it")
	assert.Equal(t, 1, stats.BrokenPromisesByTarget[paymentsTarget], "past its deadline: a broken promise")
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.Len(t, found.Tickets, 2)
	assert.Equal(t, resent.TicketID, found.Tickets[0].TicketID)
}

// partial answers a search with every matching ticket but the newest, and
// says it is incomplete: a lookup that may hide others. One ticket of two
// from it is not "exactly one".
func TestSearchPartialOmitsTheNewestMatchAndSaysItIsIncomplete(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	first, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	_, err = f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchPartial, Times: 1}}}))

	found, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.False(t, found.Complete)
	require.Len(t, found.Tickets, 1)
	assert.Equal(t, first.TicketID, found.Tickets[0].TicketID)

	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.True(t, found.Complete, "one search only")
	assert.Len(t, found.Tickets, 2)
}

// A search fault can be aimed at one target: the next search naming it
// gets the mode, whatever other faults are set meanwhile, and searches of
// other targets are untouched.
func TestASearchFaultAimedAtATargetHitsTheNextSearchForItOnly(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchForTarget: map[string]releaseapi.SearchMode{paymentsTarget: releaseapi.SearchHide}}))
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{LatencyMS: 1}), "another operation's faults")

	other := payments
	other.Environment = "staging"
	found, err := f.client.SearchTickets(context.Background(), other.Target())
	require.NoError(t, err)
	assert.True(t, found.Complete, "another target is untouched")

	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.False(t, found.Complete)
	assert.Empty(t, found.Tickets)
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.True(t, found.Complete, "once")
	assert.Len(t, found.Tickets, 1)

	require.Error(t, f.sim.SetFaults(releaseapi.Faults{SearchForTarget: map[string]releaseapi.SearchMode{paymentsTarget: "sometimes"}}))

	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchForTarget: map[string]releaseapi.SearchMode{paymentsTarget: releaseapi.SearchHide}}))
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{DropSearchForTarget: true}))
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.True(t, found.Complete, "dropped before it was used")
}

// A create fault aimed at a target hits the next create for it only.
func TestACreateFaultAimedAtATargetHitsTheNextCreateForItOnly(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{CreateForTarget: map[string]releaseapi.CreateMode{paymentsTarget: releaseapi.CreateDuplicateThenDrop}}))
	other := payments
	other.Environment = "staging"
	_, err := f.client.CreateTicket(context.Background(), other)
	require.NoError(t, err, "another target is untouched")
	_, err = f.client.CreateTicket(context.Background(), payments)
	require.Error(t, err, "the aimed create drops its answer")
	assert.Equal(t, 2, f.sim.Stats().TicketsByTarget[paymentsTarget])
	_, err = f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err, "once")
	require.Error(t, f.sim.SetFaults(releaseapi.Faults{CreateForTarget: map[string]releaseapi.CreateMode{paymentsTarget: "sometimes"}}))
}

// Aimed twice, a fault hits a create and the re-send after it: the way a
// campaign makes one operation break the promise on both of its creates.
func TestACreateFaultAimedTwiceHitsTheNextTwoCreatesForItsTarget(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{
		CreateForTarget:      map[string]releaseapi.CreateMode{paymentsTarget: releaseapi.CreateReject},
		CreateForTargetTimes: map[string]int{paymentsTarget: 2},
	}))
	for range 2 {
		_, err := f.client.CreateTicket(context.Background(), payments)
		require.Error(t, err, "aimed")
	}
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err, "twice, no more")

	require.Error(t, f.sim.SetFaults(releaseapi.Faults{CreateForTargetTimes: map[string]int{paymentsTarget: 2}}), "times for a target nothing is aimed at")
	require.Error(t, f.sim.SetFaults(releaseapi.Faults{
		CreateForTarget:      map[string]releaseapi.CreateMode{paymentsTarget: releaseapi.CreateReject},
		CreateForTargetTimes: map[string]int{paymentsTarget: 0},
	}))
}

// An aimed partial search hides one ticket of two: while its target has
// fewer (the index may lag the creates) searches see everything and the
// fault waits.
func TestAnAimedPartialSearchWaitsForTwoTicketsToHideOne(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchForTarget: map[string]releaseapi.SearchMode{paymentsTarget: releaseapi.SearchPartial}}))
	found, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.True(t, found.Complete, "nothing to hide yet")
	assert.Len(t, found.Tickets, 1)

	_, err = f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.False(t, found.Complete)
	assert.Len(t, found.Tickets, 1, "one of two hidden")
	found, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Len(t, found.Tickets, 2, "once")
}

func TestEveryTicketsOriginNamesTheFaultAndWhetherItBrokeThePromise(t *testing.T) {
	f := newFixture(t, 0, 200*time.Millisecond)
	arrived := f.clock.Now()
	deadline := lateCommit(t, f, releaseapi.CreateCommitLateBeyondDeadline, 3000)
	f.clock.Advance(13 * time.Second)
	plain, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)

	origins := f.sim.Origins()
	require.Len(t, origins, 2)
	late := origins["ticket-9001"]
	assert.Equal(t, releaseapi.CreateCommitLateBeyondDeadline, late.Fault)
	assert.True(t, late.Broken, "it landed past the deadline it carried")
	assert.Equal(t, arrived, late.Arrived)
	require.NotNil(t, late.CommitDeadline)
	assert.Equal(t, deadline, *late.CommitDeadline)
	assert.Contains(t, late.String(), "promise broken")
	assert.Equal(t, releaseapi.Origin{Arrived: f.clock.Now()}, origins[plain.TicketID], "a create that drew no fault and carried no deadline")
}

func TestDuplicateThenDropsSecondTicketNamesTheFirst(t *testing.T) {
	f := newFixture(t, 0, 200*time.Millisecond)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}}))
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.Error(t, err)

	origins := f.sim.Origins()
	assert.False(t, origins["ticket-9001"].Broken)
	assert.Equal(t, releaseapi.Origin{Fault: releaseapi.CreateDuplicateThenDrop, Arrived: f.clock.Now(), Broken: true, AfterTicket: "ticket-9001"}, origins["ticket-9002"])
}
