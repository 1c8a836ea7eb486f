package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

const releaseKey = "release-test-key"

var (
	deployer = tools.Caller{ClientID: "release-agent", UserID: "dana", TenantID: "team-payments", Roles: []string{policy.RoleDeployer}}
	// paymentsTicket is the one intended effect of these scenarios.
	paymentsTicket = "payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"
)

// clocks are the three actors' clocks: each reads the shared base time
// plus its own offset, so a test can skew any of them and still move all
// of them together with base.Advance.
type clocks struct {
	base                           *testclock.Clock
	dispatcher, reconciler, provid time.Duration
}

func (c clocks) at(offset time.Duration) func() time.Time {
	return func() time.Time { return c.base.Now().Add(offset) }
}

// releaseFixture is the Release API simulator (provider clock), the real
// client and family, a dispatcher's executor (dispatcher clock) and a
// reconciler with its own executor (reconciler clock), on one fresh table.
type releaseFixture struct {
	clocks
	st     *store.Store
	sim    *releaseapi.Server
	client *provider.ReleaseClient
	fam    *release.Family
	disp   *tools.Executor
	recon  *reconcile.Service
	skew   time.Duration
	audit  *auditLog
}

type releaseOptions struct {
	clocks   clocks
	skew     time.Duration // the configured clock skew bound
	recovery tools.Recovery
	lag      time.Duration
}

func newReleaseFixture(t *testing.T, o releaseOptions) releaseFixture {
	t.Helper()
	if o.clocks.base == nil {
		o.clocks.base = testclock.New(t0)
	}
	if o.recovery.ProbeBudget == 0 {
		o.recovery = release.RecoveryForLag(o.lag)
	}
	st := engine.NewStore(t)
	sim := releaseapi.New(releaseapi.Config{APIKey: releaseKey, Clock: o.clocks.at(o.clocks.provid), SearchLag: o.lag, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	// The client gives up long before the simulator's hold limit: a held
	// create ends our wait, and only the simulator decides when it commits.
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: server.URL, APIKey: releaseKey, MaxConns: 4, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	fam := release.New(client, policy.DeployGrants{"team-payments": {"payments-api"}}, o.recovery)
	budget := admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: time.Second, Reserve: 100 * time.Millisecond}
	executor := func(clock func() time.Time) *tools.Executor {
		cfg := tools.ExecutorConfig{Store: st, Budget: budget, Clock: clock}
		withSkewBound(&cfg, o.skew)
		ex, err := tools.NewExecutor(cfg)
		require.NoError(t, err)
		return ex
	}
	f := releaseFixture{clocks: o.clocks, st: st, sim: sim, client: client, fam: fam, disp: executor(o.clocks.at(o.clocks.dispatcher)), skew: o.skew, audit: &auditLog{}}
	f.recon, err = reconcile.New(reconcile.Config{
		Executor: executor(o.clocks.at(o.clocks.reconciler)), Families: map[string]tools.WriteTool{release.ToolCreate: fam},
		Operator: operator, Jitter: identity, Auditor: obs.NewAuditor(f.audit),
		Sleep: func(_ context.Context, d time.Duration) error { o.clocks.base.Advance(d); return nil },
	})
	require.NoError(t, err)
	return f
}

// submitWithFault sends the first create through the dispatcher under one
// create fault (none when mode is empty) and returns the stored operation.
func (f releaseFixture) submitWithFault(t *testing.T, mode releaseapi.CreateMode, overrun time.Duration) operation.Operation {
	t.Helper()
	faults := releaseapi.Faults{LateCommitOverrunMS: int(overrun / time.Millisecond)}
	if mode != "" {
		faults.Create = []releaseapi.CreateFault{{Mode: mode, Times: 1}}
	}
	require.NoError(t, f.sim.SetFaults(faults))
	args, err := json.Marshal(map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu", "operation_id": "deploy-payments-8bc911d"})
	require.NoError(t, err)
	sub, err := f.disp.Submit(context.Background(), f.fam, deployer, args, "")
	require.NoError(t, err)
	return sub.Operation
}

func (f releaseFixture) get(t *testing.T, handle string) operation.Operation {
	t.Helper()
	op, err := f.st.Get(context.Background(), handle)
	require.NoError(t, err)
	return op
}

// needsWork: the reconciler must look at op again (its state needs it, or
// it SUCCEEDED with a duplicate audit due).
func needsWork(op operation.Operation) bool {
	return op.NeedsReconciliation()
}

// drive runs the reconciler on handle as a sweep would, moving the base
// clock to each due time (a lease counts as due only after the skew bound),
// until nothing more is due; then lets five minutes pass so every late
// commit the simulator holds has happened, and drives once more.
func (f releaseFixture) drive(t *testing.T, handle string) operation.Operation {
	t.Helper()
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		for step := 0; ; step++ {
			require.Less(t, step, 60, "the operation never stopped being due")
			op := f.get(t, handle)
			if !needsWork(op) {
				break
			}
			due := op.DueAt
			if op.State == operation.StatePending {
				due = due.Add(f.skew)
			}
			if now := f.at(f.reconciler)(); due.After(now) {
				f.base.Advance(due.Sub(now))
			}
			_, err := f.recon.Reconcile(ctx, op)
			require.NoError(t, err)
		}
		f.base.Advance(5 * time.Minute)
	}
	return f.get(t, handle)
}

// tickets is how many tickets the provider really holds for the target.
func (f releaseFixture) tickets() int {
	return f.sim.Stats().TicketsByTarget[paymentsTicket]
}

// storedTicketOp inserts the ticket operation directly (the insert grants
// the dispatch), PENDING with lease from the dispatcher's clock.
func (f releaseFixture) storedTicketOp(t *testing.T, lease time.Duration) operation.Operation {
	t.Helper()
	target := map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"}
	key, err := operation.NewRequestKey(deployer.ClientID, deployer.TenantID, deployer.UserID, release.ToolCreate, "deploy-payments-stored")
	require.NoError(t, err)
	digest, err := operation.RequestDigest(release.ToolCreate, deployer.UserID, target)
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey(release.BusinessKeyKind, target["service"], target["commit"], target["environment"])
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: deployer.UserID,
		TenantID: deployer.TenantID, Target: target, Payload: target}, f.at(f.dispatcher)(), lease)
	require.NoError(t, err)
	op = op.WithCommitDeadline(f.disp.CommitDeadline(op.DueAt))
	return insertNew(t, f.st, op)
}
