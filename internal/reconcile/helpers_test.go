package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

var t0 = time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC)

const (
	simKey   = "risk-test-key"
	operator = "risk-oncall"
)

// caller owns orders O20260728001-050 (merchant M1 in the simulator).
var caller = tools.Caller{ClientID: "support-assistant", UserID: "alice", TenantID: "M1"}

// keyLog records the Idempotency-Key of every create the simulator saw.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/reviews" {
			k.mu.Lock()
			k.keys = append(k.keys, r.Header.Get("Idempotency-Key"))
			k.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (k *keyLog) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

// auditLog lets several auditors share one buffer.
type auditLog struct{ testsync.Buffer }

// records decodes the audit lines of one kind.
func (b *auditLog) records(t *testing.T, kind string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

type fixture struct {
	// clock is the executor's and so the reconciler's clock: settle
	// windows, leases and backoffs pass without sleeping.
	clock  *testclock.Clock
	st     *store.Store
	db     *dynamodb.Client
	table  string
	sim    *riskapi.Server
	keys   *keyLog
	family *riskreview.Family
	exec   *tools.Executor
	audit  *auditLog
}

type fixtureOptions struct {
	recovery tools.Recovery
	skew     time.Duration
}

// newFixture wires a fresh table on the shared engine, a Risk API
// simulator on loopback, the real provider client and riskreview family,
// and an executor on a fake clock starting at t0.
func newFixture(t *testing.T, opts ...func(*fixtureOptions)) fixture {
	t.Helper()
	o := fixtureOptions{recovery: riskreview.DefaultRecovery()}
	for _, opt := range opts {
		opt(&o)
	}
	st := engine.NewStore(t)
	db, err := engine.Client(context.Background())
	require.NoError(t, err)

	sim := riskapi.New(riskapi.Config{APIKey: simKey, HoldLimit: 5 * time.Second})
	keys := &keyLog{}
	server := httptest.NewServer(keys.wrap(sim))
	t.Cleanup(server.Close)
	client, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: server.URL, APIKey: simKey, MaxConns: 16, Timeout: 300 * time.Millisecond,
	})
	require.NoError(t, err)

	clock := testclock.New(t0)
	exec, err := tools.NewExecutor(tools.ExecutorConfig{
		Store: st,
		Budget: admission.BudgetConfig{
			Auth: time.Second, Store: 5 * time.Second, Downstream: 2 * time.Second, Reserve: 100 * time.Millisecond,
		},
		Clock:          clock.Now,
		ClockSkewBound: o.skew,
	})
	require.NoError(t, err)
	return fixture{
		clock: clock, st: st, db: db, table: st.Table(), sim: sim, keys: keys,
		family: riskreview.New(client, o.recovery), exec: exec, audit: &auditLog{},
	}
}

func withRecovery(mutate func(*tools.Recovery)) func(*fixtureOptions) {
	return func(o *fixtureOptions) { mutate(&o.recovery) }
}

// withClockSkewBound sets the executor's clock skew bound.
func withClockSkewBound(d time.Duration) func(*fixtureOptions) {
	return func(o *fixtureOptions) { o.skew = d }
}

func identity(d time.Duration) time.Duration { return d }

// service builds a reconciler over the fixture's executor; jitter is off so
// due times are exact.
func (f fixture) service(t *testing.T, families ...tools.WriteTool) *reconcile.Service {
	t.Helper()
	return f.serviceWith(t, func(*reconcile.Config) {}, families...)
}

// serviceWith builds the service with one configuration change.
func (f fixture) serviceWith(t *testing.T, change func(*reconcile.Config), families ...tools.WriteTool) *reconcile.Service {
	t.Helper()
	byName := map[string]tools.WriteTool{}
	if len(families) == 0 {
		families = []tools.WriteTool{f.family}
	}
	for _, fam := range families {
		byName[fam.Name()] = fam
	}
	cfg := reconcile.Config{
		Executor: f.exec, Families: byName, Operator: operator, Jitter: identity,
		Auditor: obs.NewAuditor(f.audit),
		// Waiting for an operation to become due moves the test clock.
		Sleep: func(_ context.Context, d time.Duration) error { f.clock.Advance(d); return nil },
	}
	change(&cfg)
	svc, err := reconcile.New(cfg)
	require.NoError(t, err)
	return svc
}

func (f fixture) faults(t *testing.T, faults riskapi.Faults) {
	t.Helper()
	require.NoError(t, f.sim.SetFaults(faults))
}

// submit runs a real first attempt through the executor.
func (f fixture) submit(t *testing.T, operationID, orderID string) operation.Operation {
	t.Helper()
	args, err := json.Marshal(riskreview.Args{OrderID: orderID, Reason: "chargeback pattern", OperationID: operationID})
	require.NoError(t, err)
	sub, err := f.exec.Submit(context.Background(), f.family, caller, args, "")
	if err != nil {
		var fail *tools.Failure
		require.ErrorAs(t, err, &fail, "submit: %v", err)
	}
	return sub.Operation
}

// submitUnknown runs a first attempt that one create fault of mode leaves
// UNKNOWN.
func (f fixture) submitUnknown(t *testing.T, mode riskapi.CreateMode, operationID, orderID string) operation.Operation {
	t.Helper()
	f.faults(t, riskapi.Faults{Create: []riskapi.CreateFault{{Mode: mode, Times: 1}}})
	op := f.submit(t, operationID, orderID)
	require.Equal(t, operation.StateUnknown, op.State)
	return op
}

func (f fixture) get(t *testing.T, handle string) operation.Operation {
	t.Helper()
	op, err := f.st.Get(context.Background(), handle)
	require.NoError(t, err)
	return op
}

// storedOp inserts an operation directly (no dispatch): PENDING with a
// lease from the current fake time.
func (f fixture) storedOp(t *testing.T, operationID, orderID string, lease time.Duration) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, riskreview.ToolRequest, operationID)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(key.Tool, caller.UserID, map[string]string{"order_id": orderID, "reason": "r"})
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey("risk_review", orderID, riskreview.ReviewType, riskreview.Generation)
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: caller.UserID, TenantID: caller.TenantID,
		Target:  map[string]string{"order_id": orderID, "review_type": riskreview.ReviewType},
		Payload: map[string]string{"order_id": orderID, "reason": "r", "review_type": riskreview.ReviewType},
	}, f.clock.Now(), lease)
	require.NoError(t, err)
	return insertNew(t, f.st, op)
}

// toUnknown records a lost response on a PENDING operation, due at once.
func (f fixture) toUnknown(t *testing.T, op operation.Operation) operation.Operation {
	t.Helper()
	next, err := f.st.Transition(context.Background(), op, operation.Event{
		Type: operation.EventResponseMissing, At: f.clock.Now(), NextAt: f.clock.Now(), Detail: "test: response lost",
	})
	require.NoError(t, err)
	return next
}

func lastEvent(op operation.Operation) operation.Event {
	return op.Journal[len(op.Journal)-1]
}

func orderID(i int) string { return fmt.Sprintf("O202607280%02d", i%50+1) }

// insertNew stores op, which must be the first of its keys, and returns it
// as stored.
func insertNew(t *testing.T, st *store.Store, op operation.Operation) operation.Operation {
	t.Helper()
	res, err := st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, store.Inserted, res.Kind)
	return res.Operation
}
