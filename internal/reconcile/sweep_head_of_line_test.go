package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// closedURL is an http URL on 127.0.0.1 where nothing listens: every
// request to it is refused before a byte is written (not_dispatched).
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// A probe that was never sent (connection refused, or every connection
// held) spends nothing of the probe budget. It used to leave its operation
// at its old due time too, at the head of the oldest-first merge: with
// MaxPerInvocation of them older than everything else, every sweep
// examined exactly those and never reached the newer work of any other
// family, here a Release ticket whose dispatcher died (a PENDING with an
// expired lease, which only the sweep moves). The operation's due time now
// moves on by at least 30 s, with no journal event.
func TestNeverSentProbesDoNotStarveTheRestOfTheSweep(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWhileRiskRefusesConnections(t)

	// Three risk reviews left UNKNOWN (older than anything else).
	for i := range 3 {
		f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-hol-risk-%02d", i), orderID(70+i), time.Minute))
	}
	f.clock.Advance(time.Second)
	// A ticket whose dispatcher died: its lease expires one minute later.
	ticket := f.storedOpOf(t, release.ToolCreate, "op-hol-ticket-01", time.Minute)
	f.clock.Advance(2 * time.Minute)

	for sweep := 1; sweep <= 5; sweep++ {
		rep, err := svc.Sweep(context.Background())
		require.NoError(t, err)
		t.Logf("sweep %d: examined=%d transitions=%d errors=%d stopped=%s", sweep, rep.Examined, rep.Transitions, rep.Errors, rep.Stopped)
		f.clock.Advance(time.Minute) // the schedule's rate
	}
	got := f.get(t, ticket.Handle)
	require.NotEqual(t, operation.StatePending, got.State,
		"five sweeps never reached the ticket's expired lease: the never-sent risk probes hold the head of the due index")
}

// A due-index item that decodes but needs no reconciliation as this build
// reads it (its state hand-set to ESCALATED in the console, as the
// undecodable-item tests assume of hand edits) used to count as examined
// work: MaxPerInvocation of them stopped every sweep before any work, for
// good. It is now bounded with the parked and undecodable items.
func TestASettledItemLeftInTheDueIndexDoesNotBlockTheSweep(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.BatchLimit, c.MaxPerInvocation = 2, 3 })
	for i := range 3 {
		stale := f.storedOp(t, fmt.Sprintf("op-settled-idx-%02d", i), orderID(80+i), time.Minute)
		f.corrupt(t, stale.Handle, "state", string(operation.StateEscalated))
	}
	f.clock.Advance(10 * time.Second)
	good := f.storedOp(t, "op-settled-idx-good", orderID(90), time.Minute)
	f.clock.Advance(2 * time.Minute)

	for sweep := 1; sweep <= 5; sweep++ {
		rep, err := svc.Sweep(context.Background())
		require.NoError(t, err)
		t.Logf("sweep %d: examined=%d transitions=%d errors=%d stopped=%s", sweep, rep.Examined, rep.Transitions, rep.Errors, rep.Stopped)
		f.clock.Advance(time.Minute)
	}
	require.NotEqual(t, operation.StatePending, f.get(t, good.Handle).State,
		"five sweeps never reached the good operation's expired lease: settled items left in the due index hold its head")
}

// After a family's first never-sent search in a sweep, the rest of that
// family's due searches are moved on without asking the provider again:
// one refused attempt a sweep, not one per operation.
func TestAnUnreachableProviderIsAskedOnceASweep(t *testing.T) {
	f := newFixture(t)
	probes := &countingProbes{}
	svc := f.serviceWhileRiskRefusesConnectionsCounting(t, probes)
	var handles []string
	for i := range 12 {
		handles = append(handles, f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-once-risk-%02d", i), orderID(40+i), time.Minute)).Handle)
	}
	f.clock.Advance(time.Second)

	rep, err := svc.Sweep(context.Background())

	require.NoError(t, err)
	assert.Equal(t, int32(1), probes.n.Load(), "one refused search; the other eleven were postponed without an attempt")
	assert.Equal(t, 0, rep.Examined, "a never-sent search is not examined work")
	for _, h := range handles {
		assert.True(t, f.get(t, h).DueAt.After(f.clock.Now()), "%s moved on", h)
	}
}

// countingProbes counts the searches a family was asked for.
type countingProbes struct{ n atomic.Int32 }

type countingFamily struct {
	*riskreview.Family
	probes *countingProbes
}

func (c countingFamily) Probe(ctx context.Context, op operation.Operation) (tools.ProbeResult, error) {
	c.probes.n.Add(1)
	return c.Family.Probe(ctx, op)
}

// serviceWhileRiskRefusesConnections is a reconciler of both families,
// three operations a sweep, whose Risk API refuses every connection (a
// network-level outage) while the Release simulator answers.
func (f fixture) serviceWhileRiskRefusesConnections(t *testing.T) *reconcile.Service {
	t.Helper()
	return f.serviceWhileRiskRefusesConnectionsCounting(t, &countingProbes{})
}

func (f fixture) serviceWhileRiskRefusesConnectionsCounting(t *testing.T, probes *countingProbes) *reconcile.Service {
	t.Helper()
	down, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: closedURL(t), APIKey: simKey, MaxConns: 4, Timeout: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	risk := countingFamily{Family: riskreview.New(down, riskreview.DefaultRecovery()), probes: probes}
	tickets := release.New(f.releaseClient(t), policy.DeployGrants{}, release.RecoveryForLag(0))
	return f.serviceWith(t, func(c *reconcile.Config) { c.BatchLimit, c.MaxPerInvocation = 2, 3 }, risk, tickets)
}
