package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
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
// moves on by the backoff, with no journal event.
func TestNeverSentProbesDoNotStarveTheRestOfTheSweep(t *testing.T) {
	f := newFixture(t)
	// The Risk API refuses connections (a network-level outage).
	down, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: closedURL(t), APIKey: simKey, MaxConns: 4, Timeout: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	risk := riskreview.New(down, riskreview.DefaultRecovery())
	tickets := release.New(f.releaseClient(t), policy.DeployGrants{}, release.RecoveryForLag(0))
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.BatchLimit, c.MaxPerInvocation = 2, 3 }, risk, tickets)

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
