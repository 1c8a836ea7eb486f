package tools_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// A key answered by deduplication is bound to its holder. Once that holder
// FAILED and expired, docs/design.md says the binding "answers NOT_FOUND and
// asks for a new key". But the holder's own operation_id may then be reused
// (README: after the retention "one names a new operation") for another
// fact, under the same handle; the binding names the holder only by that
// handle, so the deduplicated key's replay, its recorded replay and its
// get_operation are answered with the new, unrelated operation: a caller who
// asked for fact f1 is told "deduplicated, succeeded" about fact f2, and
// never creates f1. The task layer already ties its ids to the holder's
// creation time for exactly this reason; the binding itself does not.
func TestABindingWhoseHolderExpiredNeverAnswersWithTheNextOperationUnderItsHandle(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	ctx := context.Background()
	refused := &scripted{dispatchErr: &provider.Error{Class: provider.ClassNotDispatched, Op: "scripted.create", Err: errors.New("connection refused")}}

	holder, err := ex.Submit(ctx, refused, alice, factArgs("f1", "op-holder-exp1"), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, holder.Operation.State)
	dup, err := ex.Submit(ctx, refused, alice, factArgs("f1", "op-dup-exp0001"), "")
	require.NoError(t, err)
	require.True(t, dup.Deduplicated, "the second key is bound to the holder of f1")

	// The holder fails (escalated, then failed by an operator: its owner
	// may not withdraw it while the deduplicated key waits on it) and,
	// after the retention, is removed by TTL. Its owner then reuses its
	// operation_id for another fact, which succeeds.
	settle(t, st, holder.Operation.Handle, operation.EventRetryBudgetExhausted, operation.EventOperatorFailed)
	clock.Advance(91 * 24 * time.Hour) // the default retention, and a day
	engine.Expire(t, st, holder.Operation.Handle)
	ok := &scripted{}
	other, err := ex.Submit(ctx, ok, alice, factArgs("f2", "op-holder-exp1"), "")
	require.NoError(t, err)
	require.Equal(t, holder.Operation.Handle, other.Operation.Handle, "one key, one handle")
	require.Equal(t, operation.StateSucceeded, other.Operation.State)

	// The deduplicated key, replayed with its own arguments (f1): its holder
	// is gone, so it answers NOT_FOUND and asks for a new key.
	again, err := ex.Submit(ctx, ok, alice, factArgs("f1", "op-dup-exp0001"), "")
	requireNotFound(t, err, "the replay of a call for f1 (answered %+v)", again.Operation)
	// The same, when the replay's authorization fails now (recordedReplay):
	// the authorization's refusal stands.
	ok.authorize = tools.Fail(tools.CodeForbidden, false, nil, "not allowed; nothing was sent")
	recorded, err := ex.Submit(ctx, ok, alice, factArgs("f1", "op-dup-exp0001"), "")
	require.ErrorIs(t, err, ok.authorize, "the recorded replay of a call for f1 (answered %+v)", recorded.Operation)
	// And get_operation by the deduplicated key reads like no operation.
	got, err := ex.Find(ctx, tools.NewVisibility(ok), alice, tools.Ref{OperationID: "op-dup-exp0001"})
	requireNotFound(t, err, "get_operation by the deduplicated key (answered %+v)", got)
	assert.Equal(t, int32(1), ok.dispatches.Load())
}

// failReads refuses every connection for a GetItem of an operation item:
// the store is unreadable, writes are untouched.
type failReads struct{ next dynamodb.HTTPClient }

func (c failReads) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetItem") && enginetest.NamesOperation(req) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return c.next.Do(req)
}

// A replay whose authorization fails now is answered from the record
// (recordedReplay). When that one read fails, nothing is known about the
// record: the operation may exist and may have committed. The caller must
// then not get a final refusal that says "nothing was sent" with
// retry_allowed false (the very answer the change set out to remove), but
// an answer that says the outcome could not be read and to retry with the
// same operation_id.
func TestAReplayWhoseRecordCannotBeReadIsNotToldNothingWasSent(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	ctx := context.Background()
	tool := &scripted{}
	first, err := ex.Submit(ctx, tool, alice, factArgs("f1", "op-unreadable-1"), "")
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, first.Operation.State, "the write committed")

	db, err := engine.Client(ctx)
	require.NoError(t, err)
	db = dynamodb.New(db.Options(), func(o *dynamodb.Options) { o.HTTPClient = failReads{next: o.HTTPClient} })
	unreadable, err := store.New(db, store.Config{Table: st.Table()})
	require.NoError(t, err)
	ex2, err := tools.NewExecutor(tools.ExecutorConfig{Store: unreadable, Budget: smallBudget(), Clock: clock.Now})
	require.NoError(t, err)

	tool.authorize = tools.Fail(tools.CodeForbidden, false, nil, "no permission to create deployment tickets for this service (grant withdrawn); nothing was sent")
	_, err = ex2.Submit(ctx, tool, alice, factArgs("f1", "op-unreadable-1"), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.False(t, f.Code == tools.CodeForbidden && !f.RetryAllowed && strings.Contains(f.Message, "nothing was sent"),
		"a replay of a committed write was refused as final with %q (%s, retry_allowed %v)", f.Message, f.Code, f.RetryAllowed)
}

func requireNotFound(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	var f *tools.Failure
	require.ErrorAs(t, err, &f, msgAndArgs...)
	require.Equal(t, tools.CodeNotFound, f.Code, msgAndArgs...)
}
