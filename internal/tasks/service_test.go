package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// refusedWrite is a write family whose provider refuses every connection:
// each call leaves a RETRYABLE operation, proven unsent.
type refusedWrite struct{}

func (refusedWrite) Name() string { return "scripted_write" }
func (refusedWrite) Recovery() tools.Recovery {
	return tools.Recovery{SettleWindow: time.Second, ProbeBudget: 1, MaxAge: time.Hour, RetryBudget: 3}
}
func (refusedWrite) Prepare(_ context.Context, _ tools.Caller, raw json.RawMessage) (tools.Prepared, error) {
	var a struct {
		Fact        string `json:"fact"`
		OperationID string `json:"operation_id"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Prepared{}, err
	}
	return tools.Prepared{OperationID: a.OperationID, BusinessKey: "scripted|" + a.Fact,
		Target: map[string]string{"fact": a.Fact}, Payload: map[string]string{"fact": a.Fact}, DigestArgs: a.Fact}, nil
}
func (refusedWrite) Authorize(context.Context, tools.Caller, tools.Prepared) error { return nil }
func (refusedWrite) Dispatch(context.Context, operation.Operation) (tools.Effect, error) {
	return tools.Effect{}, &provider.Error{Class: provider.ClassNotDispatched, Op: "scripted.create", Err: errors.New("connection refused")}
}
func (refusedWrite) Verify(context.Context, operation.Operation, tools.Effect) error { return nil }
func (refusedWrite) Probe(context.Context, operation.Operation) (tools.ProbeResult, error) {
	return tools.ProbeResult{Authoritative: true}, nil
}
func (refusedWrite) Spec() tools.ToolSpec { return tools.ToolSpec{Title: "scripted"} }
func (refusedWrite) Render(_ tools.Caller, sub tools.Submission) tools.Rendered {
	return tools.Rendered{Body: map[string]any{"status": string(sub.Operation.State)}, IsError: !sub.Operation.State.Settled()}
}

func (refusedWrite) Companions() []tools.OperationTool { return nil }

var alice = tools.Caller{ClientID: "client-a", UserID: "alice", TenantID: "M1"}

// aliceOnRefusedWrites is a fresh table, a test clock, an executor and
// alice's tasks service over refusedWrite.
func aliceOnRefusedWrites(t *testing.T) (*store.Store, *testclock.Clock, *tools.Executor, tasks.IDs, *tasks.Service) {
	t.Helper()
	st := engine.NewStore(t)
	clock := testclock.New(time.Date(2026, 8, 13, 10, 0, 0, 0, time.UTC))
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Clock: clock.Now,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	ids := testIDs(t, "k")
	svc, err := tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{refusedWrite{}}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return alice, true }})
	require.NoError(t, err)
	return st, clock, ex, ids, svc
}

// Item: a cancel and a reconciler's claim racing on one RETRYABLE
// operation: exactly one wins, so a cancelled operation is never re-sent
// and an acknowledged cancel never hides a send.
func TestCancelRacingAReconcilerClaimHasExactlyOneWinner(t *testing.T) {
	st, clock, ex, ids, svc := aliceOnRefusedWrites(t)

	const rounds = 6
	cancels, claims := 0, 0
	for i := range rounds {
		sub, err := ex.Submit(context.Background(), refusedWrite{}, alice,
			json.RawMessage(fmt.Sprintf(`{"fact":"f%d","operation_id":"op-race-%05d"}`, i, i)), "")
		require.NoError(t, err)
		require.Equal(t, operation.StateRetryable, sub.Operation.State)
		var cancelErr, claimErr error
		testsync.Race(2, func(who int) {
			if who == 0 {
				cancelErr = svc.Cancel(context.Background(), ids.For(sub.Operation.Handle))
				return
			}
			at := clock.Now().Add(time.Minute)
			_, claimErr = st.Transition(context.Background(), sub.Operation,
				operation.Event{Type: operation.EventRetryClaimed, At: at, LeaseUntil: at.Add(time.Minute)})
		})
		assert.True(t, (cancelErr == nil) != (claimErr == nil), "round %d: cancel %v, claim %v", i, cancelErr, claimErr)
		stored, err := st.Get(context.Background(), sub.Operation.Handle)
		require.NoError(t, err)
		if cancelErr == nil {
			cancels++
			assert.Equal(t, operation.StateFailed, stored.State)
		} else {
			claims++
			assert.Equal(t, operation.StatePending, stored.State)
			assert.Contains(t, cancelErr.Error(), "an effect may exist")
		}
	}
	t.Logf("cancel won %d, claim won %d of %d rounds", cancels, claims, rounds)

	// The other order, forced: the cancel lands first, and a reconciler
	// that read the operation before it cannot claim it afterwards.
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"late","operation_id":"op-race-late1"}`), "")
	require.NoError(t, err)
	require.NoError(t, svc.Cancel(context.Background(), ids.For(sub.Operation.Handle)))
	at := clock.Now().Add(time.Minute)
	_, err = st.Transition(context.Background(), sub.Operation,
		operation.Event{Type: operation.EventRetryClaimed, At: at, LeaseUntil: at.Add(time.Minute)})
	var stale *store.StaleError
	require.ErrorAs(t, err, &stale, "the claim read a version the cancel replaced")
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, stored.State)
	assert.Equal(t, operation.EventClientCancelled, stored.Journal[len(stored.Journal)-1].Type)
}

func TestCancelOfAnUnknownOrForeignTaskIsTheSameError(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	ids := testIDs(t, "k")
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-foreign-01"}`), "")
	require.NoError(t, err)
	bob := tools.Caller{ClientID: "client-a", UserID: "bob", TenantID: "M2"}
	svc, err := tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{refusedWrite{}}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return bob, true }})
	require.NoError(t, err)
	foreign := svc.Cancel(context.Background(), ids.For(sub.Operation.Handle))
	unknown := svc.Cancel(context.Background(), ids.For("op_"+"aaaaaaaaaaaaaaaaaaaaaaaaaa"))
	require.Error(t, foreign)
	assert.Equal(t, unknown, foreign)
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, stored.State, "a foreign cancel changes nothing")
}

// grantedWrite is refusedWrite with a grant: everyone in the operation's
// tenant may see it (as a team granted a service sees its tickets).
type grantedWrite struct{ refusedWrite }

func (grantedWrite) Covers(c tools.Caller, owner operation.Owner) bool {
	return c.TenantID != "" && c.TenantID == owner.TenantID
}

// cancelAs submits one RETRYABLE operation as alice and cancels its task as
// who, returning the cancel's error and the stored operation after it.
func cancelAs(t *testing.T, who tools.Caller) (operation.Operation, error) {
	t.Helper()
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	ids := testIDs(t, "k")
	family := grantedWrite{}
	sub, err := ex.Submit(context.Background(), family, alice, json.RawMessage(`{"fact":"f","operation_id":"op-granted-01"}`), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, sub.Operation.State)
	svc, err := tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{family}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return who, true }})
	require.NoError(t, err)
	task, err := svc.Get(context.Background(), ids.For(sub.Operation.Handle))
	require.NoError(t, err, "%s sees the task", who.UserID)
	require.NotEmpty(t, task.TaskID)
	cancelErr := svc.Cancel(context.Background(), ids.For(sub.Operation.Handle))
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	return stored, cancelErr
}

// Seeing an operation through a grant is not owning it: a colleague in the
// same tenant may poll alice's task but not withdraw alice's intent, and is
// told why rather than "not found".
func TestACancelByAColleagueWhoSeesTheTaskThroughAGrantIsRefused(t *testing.T) {
	carol := tools.Caller{ClientID: "client-a", UserID: "carol", TenantID: "M1"}
	stored, err := cancelAs(t, carol)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only the end user who requested the operation, or an operator, may withdraw it")
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code, "a refusal of this request, not a server failure")
	assert.JSONEq(t, `{"state":"RETRYABLE","reason":"only the end user who requested the operation, or an operator, may withdraw it; keep polling tasks/get"}`,
		string(rpcErr.Data))
	assert.Equal(t, operation.StateRetryable, stored.State, "nothing changed; the reconciler will still send it")
}

// An operator may withdraw anyone's unsent operation, and the journal names
// the operator as the one who did.
func TestAnOperatorMayWithdrawAnotherUsersUnsentOperation(t *testing.T) {
	olga := tools.Caller{ClientID: "ops-console", UserID: "op-olga", TenantID: "sre", Roles: []string{tools.RoleOperator}}
	stored, err := cancelAs(t, olga)
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, stored.State)
	last := stored.Journal[len(stored.Journal)-1]
	assert.Equal(t, operation.EventClientCancelled, last.Type)
	assert.Equal(t, "op-olga", last.Actor)
}

// A stale dispatcher's evidence of an effect, journalled on an operation
// whose only dispatch was refused, makes it no longer proven unsent: the
// withdrawal is refused and the operation stays for the reconciler.
func TestEvidenceOfAnEffectForbidsTheWithdrawal(t *testing.T) {
	st, clock, ex, ids, svc := aliceOnRefusedWrites(t)
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-evidence-1"}`), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, sub.Operation.State)
	_, err = st.Transition(context.Background(), sub.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: clock.Now(), NextAt: clock.Now(), Source: "stale_dispatcher", ResourceID: "fact-1"})
	require.NoError(t, err)

	err = svc.Cancel(context.Background(), ids.For(sub.Operation.Handle))
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
	assert.Contains(t, rpcErr.Message, "fact-1", "the refusal names the evidence")
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, stored.State, "nothing withdrawn")
}
