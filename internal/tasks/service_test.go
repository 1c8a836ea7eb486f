package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/requestid"
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
// and a withdrawal never hides a send. A cancel that loses is still
// answered (acknowledged at 2026-07-28), withdrawing nothing, and says why.
func TestCancelRacingAReconcilerClaimHasExactlyOneWinner(t *testing.T) {
	st, clock, ex, _, svc := aliceOnRefusedWrites(t)

	const rounds = 6
	cancels, claims := 0, 0
	for i := range rounds {
		sub, err := ex.Submit(context.Background(), refusedWrite{}, alice,
			json.RawMessage(fmt.Sprintf(`{"fact":"f%d","operation_id":"op-race-%05d"}`, i, i)), "")
		require.NoError(t, err)
		require.Equal(t, operation.StateRetryable, sub.Operation.State)
		var decision tasks.Cancellation
		var cancelErr, claimErr error
		testsync.Race(2, func(who int) {
			if who == 0 {
				decision, cancelErr = svc.Cancel(context.Background(), svc.TaskID(sub))
				return
			}
			at := clock.Now().Add(time.Minute)
			_, claimErr = st.Transition(context.Background(), sub.Operation,
				operation.Event{Type: operation.EventRetryClaimed, At: at, LeaseUntil: at.Add(time.Minute)})
		})
		require.NoError(t, cancelErr, "round %d: a visible task's cancel is decided, never an error", i)
		assert.True(t, decision.Withdrawn != (claimErr == nil), "round %d: withdrawn %v, claim %v", i, decision.Withdrawn, claimErr)
		stored, err := st.Get(context.Background(), sub.Operation.Handle)
		require.NoError(t, err)
		if decision.Withdrawn {
			cancels++
			assert.Equal(t, operation.StateFailed, stored.State)
		} else {
			claims++
			assert.Equal(t, operation.StatePending, stored.State, "the claim won: the operation is being sent, not withdrawn")
			assert.Equal(t, operation.StatePending, decision.State)
			assert.Contains(t, decision.Reason, "an effect may exist")
		}
	}
	t.Logf("cancel won %d, claim won %d of %d rounds", cancels, claims, rounds)

	// The other order, forced: the cancel lands first, and a reconciler
	// that read the operation before it cannot claim it afterwards.
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"late","operation_id":"op-race-late1"}`), "")
	require.NoError(t, err)
	decision, err := svc.Cancel(context.Background(), svc.TaskID(sub))
	require.NoError(t, err)
	require.True(t, decision.Withdrawn)
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
	_, foreign := svc.Cancel(context.Background(), svc.TaskID(sub))
	_, unknown := svc.Cancel(context.Background(), ids.For("op_"+"aaaaaaaaaaaaaaaaaaaaaaaaaa", sub.Operation.CreatedAt))
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
// who, returning the stored operation after it and the cancel's decision.
func cancelAs(t *testing.T, who tools.Caller) (operation.Operation, tasks.Cancellation) {
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
	task, err := svc.Get(context.Background(), svc.TaskID(sub))
	require.NoError(t, err, "%s sees the task", who.UserID)
	require.NotEmpty(t, task.TaskID)
	decision, err := svc.Cancel(context.Background(), svc.TaskID(sub))
	require.NoError(t, err, "a visible task's cancel is decided, never an error")
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	return stored, decision
}

// Seeing an operation through a grant is not owning it: a colleague in the
// same tenant may poll alice's task but not withdraw alice's intent. The
// cancel withdraws nothing and says why, rather than "not found".
func TestACancelByAColleagueWhoSeesTheTaskThroughAGrantWithdrawsNothing(t *testing.T) {
	carol := tools.Caller{ClientID: "client-a", UserID: "carol", TenantID: "M1"}
	stored, decision := cancelAs(t, carol)
	assert.Equal(t, tasks.Cancellation{State: operation.StateRetryable,
		Reason: "only the end user who requested the operation, or an operator, may withdraw it; keep polling tasks/get"}, decision)
	assert.Equal(t, operation.StateRetryable, stored.State, "nothing changed; the reconciler will still send it")
}

// An operator may withdraw anyone's unsent operation, and the journal names
// the operator as the one who did.
func TestAnOperatorMayWithdrawAnotherUsersUnsentOperation(t *testing.T) {
	olga := tools.Caller{ClientID: "ops-console", UserID: "op-olga", TenantID: "sre", Roles: []string{tools.RoleOperator}}
	stored, decision := cancelAs(t, olga)
	assert.True(t, decision.Withdrawn)
	assert.Equal(t, operation.StateFailed, stored.State)
	last := stored.Journal[len(stored.Journal)-1]
	assert.Equal(t, operation.EventClientCancelled, last.Type)
	assert.Equal(t, "op-olga", last.Actor)
}

// A stale dispatcher's evidence of an effect, journalled on an operation
// whose only dispatch was refused, makes it no longer proven unsent: the
// withdrawal is refused, naming the evidence, and the operation stays for
// the reconciler.
func TestEvidenceOfAnEffectForbidsTheWithdrawal(t *testing.T) {
	st, clock, ex, _, svc := aliceOnRefusedWrites(t)
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-evidence-1"}`), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, sub.Operation.State)
	_, err = st.Transition(context.Background(), sub.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: clock.Now(), NextAt: clock.Now(), Source: "stale_dispatcher", ResourceID: "fact-1"})
	require.NoError(t, err)

	decision, err := svc.Cancel(context.Background(), svc.TaskID(sub))
	require.NoError(t, err)
	assert.False(t, decision.Withdrawn)
	assert.Equal(t, operation.StateRetryable, decision.State)
	assert.Contains(t, decision.Reason, "fact-1", "the refusal names the evidence")
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, stored.State, "nothing withdrawn")
}

// A FAILED operation expires after the retention, and the same
// operation_id, reused as the README allows, then names a new operation
// under the same handle. The old task's id names the operation it was
// minted for only: it reads as unknown, never as the new operation (a
// cancelled task reporting working, then another intent's result), and
// the two tasks have two ids ("Task IDs MUST be unique among all tasks").
func TestAnExpiredTasksIdNeverNamesTheNextOperationUnderTheSameKey(t *testing.T) {
	st, clock, ex, _, svc := aliceOnRefusedWrites(t)
	ctx := context.Background()
	args := json.RawMessage(`{"fact":"f-expiry","operation_id":"op-expiry-0001"}`)
	first, err := ex.Submit(ctx, refusedWrite{}, alice, args, "")
	require.NoError(t, err)
	oldID := svc.TaskID(first)
	decision, err := svc.Cancel(ctx, oldID)
	require.NoError(t, err)
	require.True(t, decision.Withdrawn)
	task, err := svc.Get(ctx, oldID)
	require.NoError(t, err)
	require.Equal(t, tasks.StatusCancelled, task.Status)

	clock.Advance(time.Hour + time.Minute) // past the retention
	engine.Expire(t, st, first.Operation.Handle)
	second, err := ex.Submit(ctx, refusedWrite{}, alice, args, "")
	require.NoError(t, err)
	require.Equal(t, first.Operation.Handle, second.Operation.Handle, "one key, one handle")

	_, err = svc.Get(ctx, oldID)
	assert.Equal(t, errUnknown(t, svc), err, "the expired task reads as unknown")
	_, err = svc.Cancel(ctx, oldID)
	assert.Equal(t, errUnknown(t, svc), err)
	assert.NotEqual(t, oldID, svc.TaskID(second), "two tasks, two ids")
	got, err := svc.Get(ctx, svc.TaskID(second))
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusWorking, got.Status, "the new operation's own task")
}

// A call deduplicated onto another key's operation has the task of its own
// key, tied to the operation it was answered with: once that holder has
// expired and its key records a new operation under the same handle, the
// deduplicated caller's task reads as unknown, not as the new operation.
func TestADeduplicatedCallersTaskNamesTheHolderItWasAnsweredWith(t *testing.T) {
	st, clock, ex, _, svc := aliceOnRefusedWrites(t)
	ctx := context.Background()
	holderArgs := json.RawMessage(`{"fact":"f-shared","operation_id":"op-holder-0001"}`)
	holder, err := ex.Submit(ctx, refusedWrite{}, alice, holderArgs, "")
	require.NoError(t, err)
	dup, err := ex.Submit(ctx, refusedWrite{}, alice, json.RawMessage(`{"fact":"f-shared","operation_id":"op-dup-00000001"}`), "")
	require.NoError(t, err)
	require.True(t, dup.Deduplicated)
	dupID := svc.TaskID(dup)
	require.NotEqual(t, svc.TaskID(holder), dupID, "its own key's task")
	got, err := svc.Get(ctx, dupID)
	require.NoError(t, err, "the deduplicated caller's task resolves to the holder")
	assert.Equal(t, tasks.StatusWorking, got.Status)

	// The holder fails (its owner may not withdraw it: the deduplicated
	// call waits on it), is removed after the retention, and its
	// operation_id then records another operation under its handle.
	escalated, err := ex.Transition(ctx, refusedWrite{}.Name(), holder.Operation,
		operation.Event{Type: operation.EventRetryBudgetExhausted, At: clock.Now(), Detail: "budget spent"}, nil)
	require.NoError(t, err)
	_, err = ex.Transition(ctx, refusedWrite{}.Name(), escalated,
		operation.Event{Type: operation.EventOperatorFailed, At: clock.Now(), Actor: "op-olga", Detail: "provider shows no effect"}, nil)
	require.NoError(t, err)
	clock.Advance(time.Hour + time.Minute)
	engine.Expire(t, st, holder.Operation.Handle)
	again, err := ex.Submit(ctx, refusedWrite{}, alice, holderArgs, "")
	require.NoError(t, err)
	require.Equal(t, holder.Operation.Handle, again.Operation.Handle)

	_, err = svc.Get(ctx, dupID)
	assert.Equal(t, errUnknown(t, svc), err, "the binding now leads to another operation than the one the task was minted for")
}

// errUnknown is the service's answer to an id that names nothing.
func errUnknown(t *testing.T, svc *tasks.Service) error {
	t.Helper()
	_, err := svc.Get(context.Background(), "tsk_unknown")
	require.Error(t, err)
	return err
}

// failingEngine fails the engine requests for action that name an
// operation item: with applied, each is sent and its answer lost (the
// caller sees a reset); without, none is sent.
type failingEngine struct {
	next    dynamodb.HTTPClient
	action  string
	applied bool
}

func (c *failingEngine) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+c.action) || !enginetest.NamesOperation(req) {
		return c.next.Do(req)
	}
	if c.applied {
		resp, err := c.next.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// failingService is alice's tasks service over st whose engine requests
// for action fail (failingEngine), logging and auditing into the buffers
// returned.
func failingService(t *testing.T, st *store.Store, action string, applied bool) (svc *tasks.Service, logs, audit *bytes.Buffer) {
	t.Helper()
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	failing := &failingEngine{action: action, applied: applied}
	db = dynamodb.New(db.Options(), func(o *dynamodb.Options) { failing.next = o.HTTPClient; o.HTTPClient = failing })
	failingStore, err := store.New(db, store.Config{Table: st.Table()})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: failingStore,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	logs, audit = &bytes.Buffer{}, &bytes.Buffer{}
	svc, err = tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{refusedWrite{}}, IDs: testIDs(t, "k"), Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return alice, true },
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Auditor: obs.NewAuditor(audit)})
	require.NoError(t, err)
	return svc, logs, audit
}

// A withdrawal whose write was sent and whose answer was lost may have
// applied: the cancel answers -32603 saying its outcome is unknown and how
// to learn it, never that nothing was cancelled, and the cause is logged.
func TestACancelWhoseWriteAnswerWasLostDoesNotClaimNothingWasCancelled(t *testing.T) {
	st, _, ex, _, _ := aliceOnRefusedWrites(t)
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-lost-cancel1"}`), "")
	require.NoError(t, err)
	svc, logs, _ := failingService(t, st, "TransactWriteItems", true)

	_, err = svc.Cancel(context.Background(), svc.TaskID(sub))
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInternalError), rpcErr.Code)
	assert.NotContains(t, rpcErr.Message, "nothing was cancelled")
	assert.Contains(t, rpcErr.Message, "may have been recorded")
	assert.Contains(t, logs.String(), "the withdrawal's outcome is unknown")
	assert.Contains(t, logs.String(), "connection reset", "the cause")
	stored, err := st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, stored.State, "it did apply")
}

// A store failure behind a tasks method is the caller's -32603, and its
// cause is logged with the request's context, not lost.
func TestAStoreFailureBehindATaskIsLogged(t *testing.T) {
	st, _, ex, _, _ := aliceOnRefusedWrites(t)
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-read-fails1"}`), "")
	require.NoError(t, err)
	svc, logs, _ := failingService(t, st, "GetItem", false)
	ctx := requestid.With(context.Background(), requestid.IDs{Request: "req-7"})

	_, err = svc.Get(ctx, svc.TaskID(sub))
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(jsonrpc.CodeInternalError), rpcErr.Code)
	var line map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &line), "one log line: %s", logs)
	assert.Equal(t, "ERROR", line["level"])
	assert.Equal(t, "req-7", line["request_id"])
	assert.Contains(t, line["cause"], "connection reset")
}

// A cancel the server does not honour is still a decision, and audited as
// one: who asked, about which operation, denied, and why; one it honours
// is audited as allowed.
func TestEveryCancelDecisionIsAudited(t *testing.T) {
	st, _, ex, _, _ := aliceOnRefusedWrites(t)
	ctx := context.Background()
	kept, err := ex.Submit(ctx, refusedWrite{}, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-audit-kept1"}`), "")
	require.NoError(t, err)
	_, err = st.Transition(ctx, kept.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: kept.Operation.UpdatedAt, NextAt: kept.Operation.UpdatedAt, Source: "stale_dispatcher", ResourceID: "fact-1"})
	require.NoError(t, err)
	gone, err := ex.Submit(ctx, refusedWrite{}, alice, json.RawMessage(`{"fact":"f2","operation_id":"op-audit-gone1"}`), "")
	require.NoError(t, err)
	svc, _, audit := failingService(t, st, "none", false)

	for _, sub := range []tools.Submission{kept, gone} {
		_, err := svc.Cancel(ctx, svc.TaskID(sub))
		require.NoError(t, err)
	}
	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		records = append(records, r)
	}
	require.Len(t, records, 2)
	assert.Equal(t, obs.KindTaskCancel, records[0]["kind"])
	assert.Equal(t, "deny", records[0]["policy_decision"])
	assert.Equal(t, "not_withdrawn", records[0]["outcome"])
	assert.Equal(t, "RETRYABLE", records[0]["status"])
	assert.Contains(t, records[0]["detail"], "fact-1")
	assert.Equal(t, "alice", records[0]["end_user_principal"])
	assert.NotEmpty(t, records[0]["operation_hash"])
	assert.Equal(t, kept.Operation.Handle, records[0]["handle"], "the handle get_operation takes")
	assert.Equal(t, gone.Operation.Handle, records[1]["handle"])
	assert.Equal(t, "allow", records[1]["policy_decision"])
	assert.Equal(t, "withdrawn", records[1]["outcome"])
	assert.Equal(t, "FAILED", records[1]["status"])
}

// 2025-11-25's tasks/result waits for a working task at most ResultWait,
// and never past the request's own budget: it answers (says to ask again)
// while the reserve to write the answer is still left, not when the
// request's deadline has already passed.
func TestTasksResultWaitsWithinTheRequestsBudget(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 500 * time.Millisecond}})
	require.NoError(t, err)
	svc, err := tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{refusedWrite{}}, IDs: testIDs(t, "k"), Retention: time.Hour,
		ResultWait: 10 * time.Second, Caller: func(context.Context) (tools.Caller, bool) { return alice, true }})
	require.NoError(t, err)
	sub, err := ex.Submit(context.Background(), refusedWrite{}, alice, json.RawMessage(`{"fact":"f","operation_id":"op-result-wait1"}`), "")
	require.NoError(t, err)
	require.False(t, tasks.Final(sub.Operation), "a working task")

	deadline := time.Now().Add(1500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, err = svc.Result(ctx, svc.TaskID(sub))
	left := time.Until(deadline)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Contains(t, rpcErr.Message, "call tasks/result again or poll tasks/get")
	assert.Greater(t, left, 250*time.Millisecond, "answered with the reserve still left")
}

// Another request deduplicated onto an operation waits on its outcome: its
// owner may not withdraw it on its word, whoever the other caller is (a
// team granted the same service, a tenant-mate, the owner's own second
// key). The withdrawal would decide the other call's outcome, and its
// replay would answer FAILED for a cancel it never sent.
func TestAnOperationAnotherRequestWasDeduplicatedOntoIsNotWithdrawn(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	family := grantedWrite{}
	carol := tools.Caller{ClientID: "client-b", UserID: "carol", TenantID: "M1"}
	who := alice
	svc, err := tasks.New(tasks.Config{Executor: ex, Tools: []tools.Published{family}, IDs: testIDs(t, "k"), Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return who, true }})
	require.NoError(t, err)
	ctx := context.Background()
	vis := tools.NewVisibility(family)
	bindVisible := func(c tools.Caller) store.InsertOption {
		return store.BindOnlyTo(func(h operation.Operation) bool { return vis.CanSee(c, h.Owner()) })
	}
	held, err := ex.Submit(ctx, family, alice, json.RawMessage(`{"fact":"f-shared","operation_id":"op-alice-0001"}`), "", bindVisible(alice))
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, held.Operation.State)
	carolsArgs := json.RawMessage(`{"fact":"f-shared","operation_id":"op-carol-0001"}`)
	dup, err := ex.Submit(ctx, family, carol, carolsArgs, "", bindVisible(carol))
	require.NoError(t, err)
	require.True(t, dup.Deduplicated, "carol is answered with alice's operation")

	decision, err := svc.Cancel(ctx, svc.TaskID(held))
	require.NoError(t, err)
	assert.False(t, decision.Withdrawn, "another request waits on it")
	assert.Contains(t, decision.Reason, "another request")
	stored, err := st.Get(ctx, held.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, stored.State, "nothing changed; the reconciler will still send it")

	again, err := ex.Submit(ctx, family, carol, carolsArgs, "", bindVisible(carol))
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, again.Operation.State, "carol's replay is not answered with a cancel she never sent")
	who = carol
	task, err := svc.Get(ctx, svc.TaskID(dup))
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusWorking, task.Status)
}
