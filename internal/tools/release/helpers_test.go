package release_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

const apiKey = "release-test-key"

// t0 is the intent time of the tests' deployment tickets.
var t0 = time.Date(2026, 8, 13, 10, 51, 4, 120_000_000, time.UTC)

var grants = policy.DeployGrants{
	"team-payments": {"payments-api", "payments-worker"},
	"team-billing":  {"billing-api"},
}

var (
	alice    = tools.Caller{ClientID: "claude-code", UserID: "dev-alice", TenantID: "team-payments", Roles: []string{policy.RoleDeployer}}
	operator = tools.Caller{ClientID: "ops-console", UserID: "op-olga", TenantID: "sre", Roles: []string{policy.RoleOperator}}
)

// simEnv is the Release API simulator behind a real ReleaseClient.
type simEnv struct {
	// clock is shared by the simulator (created_at, watermark) and the
	// executor (dispatch and journal times), so lag is deterministic.
	clock  *testclock.Clock
	sim    *releaseapi.Server
	client *provider.ReleaseClient
}

func newSim(t *testing.T, lag time.Duration) simEnv {
	t.Helper()
	clock := testclock.New(t0)
	sim := releaseapi.New(releaseapi.Config{APIKey: apiKey, Clock: clock.Now, SearchLag: lag, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: server.URL, APIKey: apiKey, MaxConns: 4, Timeout: time.Second})
	require.NoError(t, err)
	return simEnv{clock: clock, sim: sim, client: client}
}

// fixture adds a moto-backed store and a real executor.
type fixture struct {
	simEnv
	st     *store.Store
	ex     *tools.Executor
	family *release.Family
}

func newFixture(t *testing.T, lag time.Duration) fixture {
	t.Helper()
	env := newSim(t, lag)
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{
		Store: st,
		// Generous store stage: moto is a single-threaded local engine.
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 2 * time.Second, Reserve: time.Second},
		Clock:  env.clock.Now,
	})
	require.NoError(t, err)
	return fixture{simEnv: env, st: st, ex: ex, family: release.New(env.client, grants, release.RecoveryForLag(lag))}
}

// args names the commit by its first seven digits, as people do; the tool
// takes only full ids, so it is completed (fullCommit).
func args(service, abbrev, environment, operationID string) json.RawMessage {
	m := map[string]string{"service": service, "commit": fullCommit(abbrev), "environment": environment}
	if operationID != "" {
		m["operation_id"] = operationID
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

// fullCommit completes a seven-digit abbreviation to a 40-digit commit id
// with a tail every test commit shares: "8bc911d" is the README's commit.
func fullCommit(abbrev string) string {
	const tail = "0a3c4e5f60718293a4b5c6d7e8f901234"
	return abbrev + tail[len(tail)-(40-len(abbrev)):]
}

var paymentsArgs = args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-8bc911d")

func (f fixture) submit(t *testing.T, caller tools.Caller, raw json.RawMessage) (tools.Submission, error) {
	t.Helper()
	return f.ex.Submit(context.Background(), f.family, caller, raw, "")
}

func (f fixture) setFaults(t *testing.T, faults releaseapi.Faults) {
	t.Helper()
	require.NoError(t, f.sim.SetFaults(faults))
}

func requireFailure(t *testing.T, err error, code tools.Code) *tools.Failure {
	t.Helper()
	var fail *tools.Failure
	require.ErrorAs(t, err, &fail, "want a %s business failure, got %v", code, err)
	require.Equal(t, code, fail.Code, fail.Message)
	return fail
}

// handleOf is the handle a caller's operation_id maps to for this tool.
func handleOf(t *testing.T, caller tools.Caller, operationID string) string {
	t.Helper()
	key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, release.ToolCreate, operationID)
	require.NoError(t, err)
	return key.Handle()
}

// schema compiles a JSON Schema constant the way the MCP layer does.
func schema(t *testing.T, doc string) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal([]byte(doc), &s))
	require.Equal(t, "object", s.Type)
	resolved, err := s.Resolve(nil)
	require.NoError(t, err)
	return resolved
}

func validate(t *testing.T, r *jsonschema.Resolved, v any) error {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var generic any
	require.NoError(t, json.Unmarshal(data, &generic))
	return r.Validate(generic)
}

// unknownOp is a stored-shape operation for target, dispatched at
// dispatchAt and left UNKNOWN (response missing) at endAt.
func unknownOp(t *testing.T, target map[string]string, dispatchAt, endAt time.Time) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, release.ToolCreate, "deploy-ticket-probe-1")
	require.NoError(t, err)
	digest, err := operation.RequestDigest(release.ToolCreate, alice.UserID, target)
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey(release.BusinessKeyKind, target["service"], target["commit"], target["environment"])
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: alice.UserID,
		TenantID: alice.TenantID, Target: target, Payload: target}, dispatchAt, 10*time.Second)
	require.NoError(t, err)
	// The provider promised not to commit after the wait ended.
	op = op.WithCommitDeadline(endAt)
	op, err = op.Apply(operation.Event{Type: operation.EventResponseMissing, At: endAt})
	require.NoError(t, err)
	return op
}

func paymentsTarget() map[string]string {
	return map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"}
}

// flakyAPI wraps the real client to fake what the simulator cannot: an
// authoritative read that denies or fails for some ticket ids.
type flakyAPI struct {
	release.ReleaseAPI
	getErr map[string]error
}

func (a flakyAPI) GetTicket(ctx context.Context, id string) (provider.Ticket, error) {
	if err, ok := a.getErr[id]; ok {
		return provider.Ticket{}, err
	}
	return a.ReleaseAPI.GetTicket(ctx, id)
}

func decode(raw []byte, v any) error { return json.Unmarshal(raw, v) }
