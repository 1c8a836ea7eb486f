package tools_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
)

func factArgs(fact, opID string) json.RawMessage {
	return json.RawMessage(`{"fact":"` + fact + `","operation_id":"` + opID + `"}`)
}

// settle moves an operation through the events given, as a reconciler or
// an operator would.
func settle(t *testing.T, st *store.Store, handle string, events ...operation.EventType) operation.Operation {
	t.Helper()
	op, err := st.Get(context.Background(), handle)
	require.NoError(t, err)
	for _, ev := range events {
		op, err = st.Transition(context.Background(), op, operation.Event{Type: ev, At: op.UpdatedAt.Add(time.Second), Detail: "test"})
		require.NoError(t, err)
	}
	return op
}

func TestKeyFirstAnsweredByDeduplicationWithOtherArgumentsIsAConflict(t *testing.T) {
	ex, _, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	first, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-holder-0001"), "")
	require.NoError(t, err)
	dedup, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0001"), "")
	require.NoError(t, err)
	require.True(t, dedup.Deduplicated)
	require.Equal(t, first.Operation.Handle, dedup.Operation.Handle)

	_, err = ex.Submit(context.Background(), tool, alice, factArgs("f2", "op-second-0001"), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f, "the key was answered once; other arguments may not start a second operation")
	assert.Equal(t, tools.CodeIdempotencyConflict, f.Code)
	assert.Equal(t, int32(1), tool.dispatches.Load(), "never a second operation")

	again, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0001"), "")
	require.NoError(t, err)
	assert.True(t, again.Deduplicated, "same arguments: the same answer as the first time")
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Operation.Handle, again.Operation.Handle)
}

func TestSameArgumentReplayAfterTheHolderFailedReturnsTheBoundAnswer(t *testing.T) {
	ex, st, _ := newExecutor(t, smallBudget())
	tool := &scripted{dispatchErr: context.DeadlineExceeded} // the holder ends UNKNOWN, holding the fact
	first, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-holder-0002"), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, first.Operation.State)
	dedup, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0002"), "")
	require.NoError(t, err)
	require.True(t, dedup.Deduplicated)

	// An operator settles the holder as FAILED: the business key is released.
	failed := settle(t, st, first.Operation.Handle, operation.EventProbeBudgetExhausted, operation.EventOperatorFailed)
	require.Equal(t, operation.StateFailed, failed.State)

	again, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0002"), "")
	require.NoError(t, err)
	assert.True(t, again.Deduplicated && again.Replayed, "the key's answer stays the operation it was answered with")
	assert.Equal(t, first.Operation.Handle, again.Operation.Handle)
	assert.Equal(t, operation.StateFailed, again.Operation.State)
	assert.Equal(t, int32(1), tool.dispatches.Load(), "no fresh operation runs under an answered key")

	// A new key for the released fact may start a new attempt.
	fresh, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-third-00003"), "")
	require.NoError(t, err)
	assert.False(t, fresh.Deduplicated || fresh.Replayed)
	assert.Equal(t, int32(2), tool.dispatches.Load())
}

func TestGetOperationByAKeyAnsweredByDeduplicationFindsTheHolder(t *testing.T) {
	ex, _, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	first, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-holder-0004"), "")
	require.NoError(t, err)
	_, err = ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0004"), "")
	require.NoError(t, err)
	got, err := ex.Find(context.Background(), tools.NewVisibility(tool), alice, tools.Ref{OperationID: "op-second-0004"})
	require.NoError(t, err)
	assert.Equal(t, first.Operation.Handle, got.Handle)
}

// dropAnswers applies matching requests at the engine and then loses every
// answer, the way a network partition after the request does.
type dropAnswers struct {
	next   dynamodb.HTTPClient
	action string
	// only, when set, narrows the requests whose answers are lost.
	only    func(*http.Request) bool
	dropped atomic.Int32
}

func (c *dropAnswers) Do(req *http.Request) (*http.Response, error) {
	ofOperation := enginetest.NamesOperation(req) && (c.only == nil || c.only(req))
	resp, err := c.next.Do(req)
	if err == nil && ofOperation && strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+c.action) {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.dropped.Add(1)
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, err
}

// executorDroppingAnswers is an executor on st's table whose store loses
// every answer to action.
func executorDroppingAnswers(t *testing.T, st *store.Store, action string, clock *testclock.Clock) (*tools.Executor, *dropAnswers) {
	t.Helper()
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	drop := &dropAnswers{action: action}
	db = dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		drop.next = o.HTTPClient
		o.HTTPClient = drop
	})
	lossy, err := store.New(db, store.Config{Table: st.Table()})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: lossy, Budget: smallBudget(), Clock: clock.Now})
	require.NoError(t, err)
	return ex, drop
}

func TestInsertAppliedButEveryAnswerLostIsUnknownNotNothingSent(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	lossy, drop := executorDroppingAnswers(t, st, "TransactWriteItems", clock)
	tool := &scripted{}

	_, err := lossy.Submit(context.Background(), tool, alice, factArgs("f1", "op-lost-insert-1"), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	require.Positive(t, drop.dropped.Load(), "the insert really was sent and its answer lost")
	assert.Equal(t, tools.CodeTemporaryUnavailable, f.Code)
	assert.True(t, f.RetryAllowed)
	assert.NotContains(t, f.Message, "nothing was sent")
	assert.Contains(t, f.Message, "outcome is unknown")
	assert.Contains(t, f.Message, "same operation_id")
	assert.Equal(t, int32(0), tool.dispatches.Load())

	// The operation does exist: the reconciler would send it once its lease
	// expires. The caller's retry with the same key finds it.
	again, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-lost-insert-1"), "")
	require.NoError(t, err)
	assert.True(t, again.Replayed, "the lost insert had applied")
	assert.Equal(t, operation.StatePending, again.Operation.State)
	assert.Equal(t, int32(0), tool.dispatches.Load(), "the retry does not send it a second time")
}

func TestBindingWrittenButItsAnswerLostIsStillThisKeysDeduplicatedAnswer(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	tool := &scripted{}
	first, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-holder-0005"), "")
	require.NoError(t, err)

	lossy, drop := executorDroppingAnswers(t, st, "TransactWriteItems", clock)
	drop.only = enginetest.WritesBinding
	_, err = lossy.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0005"), "")
	require.Error(t, err, "every answer to the binding was lost")
	require.Positive(t, drop.dropped.Load())

	// The binding applied: other arguments under that key are a conflict,
	// the same ones the deduplicated answer.
	_, err = ex.Submit(context.Background(), tool, alice, factArgs("f2", "op-second-0005"), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.Equal(t, tools.CodeIdempotencyConflict, f.Code)
	again, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-second-0005"), "")
	require.NoError(t, err)
	assert.True(t, again.Deduplicated)
	assert.Equal(t, first.Operation.Handle, again.Operation.Handle)
	assert.Equal(t, int32(1), tool.dispatches.Load())
}

// blocking is a write tool whose create waits until released: a first
// attempt in flight for as long as a test needs.
type blocking struct {
	scripted
	release chan struct{}
}

func (b *blocking) Dispatch(ctx context.Context, op operation.Operation) (tools.Effect, error) {
	b.dispatches.Add(1)
	select {
	case <-b.release:
		return tools.Effect{ResourceID: "res-1"}, nil
	case <-ctx.Done():
		return tools.Effect{}, ctx.Err()
	}
}

func TestReplayFindingTheFirstAttemptInFlightWaitsForItsOutcome(t *testing.T) {
	budget := smallBudget()
	budget.Downstream = 10 * time.Second // the first attempt ends when the test says, not on a timer
	ex, st, clock := newExecutor(t, budget)
	tool := &blocking{release: make(chan struct{})}
	op := insertPending(t, ex, st, clock, tool, "op-inflight-001")
	firstDone := make(chan operation.Operation, 1)
	go func() {
		next, _, _ := ex.Dispatch(context.Background(), tool, op) // the first attempt, in flight
		firstDone <- next
	}()

	replay, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-inflight-001"), "")
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, operation.StatePending, replay.Operation.State)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan tools.Submission, 1)
	go func() { waited <- ex.AwaitInFlight(ctx, replay) }()
	close(tool.release)
	first := <-firstDone
	got := <-waited
	require.Equal(t, operation.StateSucceeded, first.State)
	assert.Equal(t, operation.StateSucceeded, got.Operation.State, "the replay returns the first attempt's outcome")
	assert.Equal(t, first.Receipt, got.Operation.Receipt)
	assert.Positive(t, got.WaitReads)
	assert.Equal(t, int32(1), tool.dispatches.Load())
	t.Logf("replay waited with %d store reads", got.WaitReads)
}

func TestReplayWhoseBudgetRunsOutAnswersPendingWithTheHandle(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	tool := &scripted{}
	stuck := insertPending(t, ex, st, clock, tool, "op-stuck-00001") // its dispatcher never answers
	replay, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-stuck-00001"), "")
	require.NoError(t, err)
	require.True(t, replay.Replayed)

	ctx, cancel := context.WithTimeout(context.Background(), smallBudget().Reserve+300*time.Millisecond)
	defer cancel()
	got := ex.AwaitInFlight(ctx, replay)
	assert.Equal(t, operation.StatePending, got.Operation.State)
	assert.Equal(t, stuck.Handle, got.Operation.Handle, "pending, with the handle to ask again")
	assert.Positive(t, got.WaitReads)
	assert.Equal(t, int32(0), tool.dispatches.Load())
}

func TestReplayWaitingWhileTheReconcilerDeclaresTheDispatcherLostReturnsUnknown(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	tool := &scripted{}
	stuck := insertPending(t, ex, st, clock, tool, "op-lost-disp-01")
	replay, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-lost-disp-01"), "")
	require.NoError(t, err)
	require.Equal(t, operation.StatePending, replay.Operation.State)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan tools.Submission, 1)
	go func() { waited <- ex.AwaitInFlight(ctx, replay) }()
	settle(t, st, stuck.Handle, operation.EventDispatcherLost) // the reconciler, on lease expiry
	got := <-waited
	assert.Equal(t, operation.StateUnknown, got.Operation.State, "the wait ends on the next state, whoever wrote it")
	assert.Equal(t, int32(0), tool.dispatches.Load())
}

// insertPending stores alice's intent for fact f1 under opID as a first
// attempt would, without dispatching it.
func insertPending(t *testing.T, ex *tools.Executor, st *store.Store, clock *testclock.Clock, tool tools.WriteTool, opID string) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, tool.Name(), opID)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(tool.Name(), alice.UserID, map[string]string{"fact": "f1"})
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "scripted|f1", RequestDigest: digest,
		EndUserID: alice.UserID, TenantID: alice.TenantID, Target: map[string]string{"fact": "f1"}, Payload: map[string]string{"fact": "f1"}},
		clock.Now(), ex.Lease())
	require.NoError(t, err)
	res, err := st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, store.Inserted, res.Kind)
	return op
}

func TestReplayWaitingOnAReconcilerClaimedResendReturnsTheResendsOutcome(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	tool := &scripted{}
	op := insertPending(t, ex, st, clock, tool, "op-claimed-0001")
	retryable, err := st.Transition(context.Background(), op, operation.Event{Type: operation.EventNotDispatched,
		At: clock.Now(), NextAt: clock.Now().Add(time.Second)})
	require.NoError(t, err)
	clock.Advance(time.Second)
	claimed, err := st.Transition(context.Background(), retryable, operation.Event{Type: operation.EventRetryClaimed,
		At: clock.Now(), LeaseUntil: clock.Now().Add(ex.Lease())})
	require.NoError(t, err)

	// The caller replays while the reconciler's re-send is in flight.
	replay, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-claimed-0001"), "")
	require.NoError(t, err)
	require.Equal(t, operation.StatePending, replay.Operation.State)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan tools.Submission, 1)
	go func() { waited <- ex.AwaitInFlight(ctx, replay) }()
	resent, _, err := ex.Dispatch(context.Background(), tool, claimed)
	require.NoError(t, err)
	got := <-waited
	assert.Equal(t, operation.StateSucceeded, got.Operation.State)
	assert.Equal(t, resent.Receipt, got.Operation.Receipt)
	assert.Equal(t, int32(1), tool.dispatches.Load(), "one send: the claimed re-send")
}

// refuseShardCounts refuses every connection for the request that records
// the store's due shard count (the one before its first write).
type refuseShardCounts struct{ next dynamodb.HTTPClient }

func (c refuseShardCounts) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".UpdateItem") && !enginetest.NamesOperation(req) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return c.next.Do(req)
}

// A store records its due shard count before its first write; when that
// fails, the operation was never sent to the table, and the caller is told
// so (not "the outcome is unknown"), so no task or poll is offered for it.
func TestAFailureBeforeTheInsertWasSentSaysNothingWasRecorded(t *testing.T) {
	_, st, clock := newExecutor(t, smallBudget())
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	db = dynamodb.New(db.Options(), func(o *dynamodb.Options) { o.HTTPClient = refuseShardCounts{next: o.HTTPClient} })
	refusing, err := store.New(db, store.Config{Table: st.Table()})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: refusing, Budget: smallBudget(), Clock: clock.Now})
	require.NoError(t, err)
	tool := &scripted{}

	sub, err := ex.Submit(context.Background(), tool, alice, factArgs("f1", "op-not-recorded"), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.Equal(t, tools.CodeTemporaryUnavailable, f.Code)
	assert.True(t, f.RetryAllowed)
	assert.Contains(t, f.Message, "nothing was recorded or sent")
	assert.False(t, sub.MayExist)
	_, err = st.Get(context.Background(), sub.Key.Handle())
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, int32(0), tool.dispatches.Load())
}
