package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// scripted is a write tool whose downstream answers are injected: the
// failure paths of both tool families (timeouts, lost responses, refused
// connections) without a simulator in between.
type scripted struct {
	dispatchErr error
	verifyErr   error
	dispatches  atomic.Int32
	authorize   error
}

func (s *scripted) Name() string { return "scripted_write" }
func (s *scripted) Recovery() tools.Recovery {
	return tools.Recovery{SettleWindow: 3 * time.Second, ProbeBudget: 3, MaxAge: time.Hour, RetryBudget: 1}
}

func (s *scripted) Prepare(_ context.Context, _ tools.Caller, raw json.RawMessage) (tools.Prepared, error) {
	var a struct {
		Fact        string `json:"fact"`
		OperationID string `json:"operation_id"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.Fact == "" {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "fact is required")
	}
	return tools.Prepared{OperationID: a.OperationID, BusinessKey: "scripted|" + a.Fact,
		Target: map[string]string{"fact": a.Fact}, Payload: map[string]string{"fact": a.Fact},
		DigestArgs: map[string]string{"fact": a.Fact}}, nil
}

func (s *scripted) Authorize(context.Context, tools.Caller, tools.Prepared) error { return s.authorize }

func (s *scripted) Dispatch(ctx context.Context, _ operation.Operation) (tools.Effect, error) {
	s.dispatches.Add(1)
	if errors.Is(s.dispatchErr, context.DeadlineExceeded) {
		<-ctx.Done() // a provider slower than the budget
		return tools.Effect{}, &provider.Error{Class: provider.ClassUnknown, Op: "scripted.create", Err: ctx.Err()}
	}
	if s.dispatchErr != nil {
		return tools.Effect{}, s.dispatchErr
	}
	return tools.Effect{ResourceID: "res-1"}, nil
}

func (s *scripted) Verify(context.Context, operation.Operation, tools.Effect) error {
	return s.verifyErr
}
func (s *scripted) Probe(context.Context, operation.Operation) (tools.ProbeResult, error) {
	return tools.ProbeResult{}, errors.New("not used")
}

var alice = tools.Caller{ClientID: "client-a", UserID: "alice", TenantID: "M1"}

func newExecutor(t *testing.T, budget admission.BudgetConfig) (*tools.Executor, *store.Store, *testclock.Clock) {
	t.Helper()
	st := engine.NewStore(t)
	clock := testclock.New(time.Date(2026, 8, 13, 10, 51, 4, 0, time.UTC))
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: budget, Clock: clock.Now})
	require.NoError(t, err)
	return ex, st, clock
}

func smallBudget() admission.BudgetConfig {
	return admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 200 * time.Millisecond, Reserve: 100 * time.Millisecond}
}

func TestDispatchFailuresAreClassifiedNeverAsASecondWrite(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		verify  error
		state   operation.State
		outcome operation.Outcome
		event   operation.EventType
		bkHeld  bool
	}{
		{"created and verified", nil, nil, operation.StateSucceeded, operation.OutcomeCommittedAndVerified, operation.EventCreateSucceeded, true},
		{"explicit business rejection", &provider.Error{Class: provider.ClassRejected, StatusCode: 422}, nil, operation.StateFailed, operation.OutcomeFailedWithoutEffect, operation.EventBusinessRejected, false},
		{"connection refused", &provider.Error{Class: provider.ClassNotDispatched}, nil, operation.StateRetryable, operation.OutcomeFailedWithoutEffect, operation.EventNotDispatched, true},
		{"5xx", &provider.Error{Class: provider.ClassUnknown, StatusCode: 503}, nil, operation.StateUnknown, operation.OutcomeResponseMissing, operation.EventResponseMissing, true},
		{"connection reset", &provider.Error{Class: provider.ClassUnknown, Err: errors.New("connection reset by peer")}, nil, operation.StateUnknown, operation.OutcomeResponseMissing, operation.EventResponseMissing, true},
		{"timeout", context.DeadlineExceeded, nil, operation.StateUnknown, operation.OutcomeResponseMissing, operation.EventClientTimeout, true},
		{"created but unconfirmed", nil, errors.New("authoritative read disagrees"), operation.StateUnknown, operation.OutcomeVerificationInconclusive, operation.EventVerifyFailed, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex, st, _ := newExecutor(t, smallBudget())
			tool := &scripted{dispatchErr: tc.err, verifyErr: tc.verify}
			sub, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
			require.NoError(t, err)
			assert.Equal(t, tc.state, sub.Operation.State)
			assert.Equal(t, tc.outcome, sub.Operation.Outcome)
			assert.Equal(t, tc.event, sub.Operation.Journal[len(sub.Operation.Journal)-1].Type)
			if tc.state == operation.StateSucceeded {
				assert.Equal(t, tools.Receipt(sub.Operation.Handle, "res-1"), sub.Operation.Receipt)
			}

			// The caller retries with the same key: nothing is sent again.
			again, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
			require.NoError(t, err)
			assert.True(t, again.Replayed)
			assert.Equal(t, int32(1), tool.dispatches.Load(), "one dispatch whatever the failure")

			// A new key for the same fact is deduplicated unless the fact was released.
			other, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000002"}`), "")
			require.NoError(t, err)
			assert.Equal(t, tc.bkHeld, other.Deduplicated)
			stored, err := st.Get(context.Background(), sub.Operation.Handle)
			require.NoError(t, err)
			assert.Equal(t, tc.state, stored.State)
		})
	}
}

func TestACallAlreadyInsideItsReserveRecordsAndSendsNothing(t *testing.T) {
	ex, _, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // less than the reserve
	defer cancel()
	_, err := ex.Submit(ctx, tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.Equal(t, tools.CodeTemporaryUnavailable, f.Code)
	assert.Equal(t, int32(0), tool.dispatches.Load())
}

func TestNoBudgetLeftAtDispatchMeansProvenUnsent(t *testing.T) {
	ex, st, clock := newExecutor(t, smallBudget())
	tool := &scripted{}
	key, err := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, tool.Name(), "op-00000001")
	require.NoError(t, err)
	digest, err := operation.RequestDigest(tool.Name(), alice.UserID, map[string]string{"fact": "f1"})
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "scripted|f1", RequestDigest: digest, EndUserID: alice.UserID, TenantID: alice.TenantID}, clock.Now(), ex.Lease())
	require.NoError(t, err)
	_, err = st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // inside the reserve
	defer cancel()
	next, _, err := ex.Dispatch(ctx, tool, op)
	require.NoError(t, err, "the state write is detached from the caller's deadline")
	assert.Equal(t, operation.StateRetryable, next.State, "only a reconciler claim may send it, with the same key")
	assert.Equal(t, operation.EventNotDispatched, next.Journal[len(next.Journal)-1].Type)
	assert.Equal(t, int32(0), tool.dispatches.Load())
}

func TestRefusalsBeforeDispatchStoreNothing(t *testing.T) {
	cases := map[string]struct {
		tool   *scripted
		args   string
		header string
		code   tools.Code
	}{
		"domain validation":       {&scripted{}, `{"fact":""}`, "", tools.CodeInvalidArgument},
		"authorization":           {&scripted{authorize: tools.Fail(tools.CodeForbidden, false, nil, "no")}, `{"fact":"f1"}`, "", tools.CodeForbidden},
		"argument and header":     {&scripted{}, `{"fact":"f1","operation_id":"op-00000001"}`, "op-00000002", tools.CodeInvalidArgument},
		"ill-formed header key":   {&scripted{}, `{"fact":"f1"}`, "bad key", tools.CodeInvalidArgument},
		"ill-formed operation_id": {&scripted{}, `{"fact":"f1","operation_id":"x"}`, "", tools.CodeInvalidArgument},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ex, st, _ := newExecutor(t, smallBudget())
			_, err := ex.Submit(context.Background(), tc.tool, alice, json.RawMessage(tc.args), tc.header)
			var f *tools.Failure
			require.ErrorAs(t, err, &f)
			assert.Equal(t, tc.code, f.Code)
			assert.Equal(t, int32(0), tc.tool.dispatches.Load())
			page, err := st.Due(context.Background(), time.Now().Add(time.Hour), 10, "")
			require.NoError(t, err)
			assert.Empty(t, page.Operations, "nothing stored")
		})
	}
}

func TestStoreUnavailableIsTemporaryAndSendsNothing(t *testing.T) {
	ex, st, _ := newExecutor(t, smallBudget())
	require.NoError(t, st.DeleteTable(context.Background())) // the table is gone: every write fails
	tool := &scripted{}
	_, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.Equal(t, tools.CodeTemporaryUnavailable, f.Code)
	assert.True(t, f.RetryAllowed, "nothing was recorded, so the same call may be retried")
	assert.Equal(t, int32(0), tool.dispatches.Load())
}

func TestDigestConflictIsRefusedWithoutDispatch(t *testing.T) {
	ex, _, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	_, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
	require.NoError(t, err)
	_, err = ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f2","operation_id":"op-00000001"}`), "")
	var f *tools.Failure
	require.ErrorAs(t, err, &f)
	assert.Equal(t, tools.CodeIdempotencyConflict, f.Code)
	assert.Equal(t, int32(1), tool.dispatches.Load())
}

// A refusal once the request key is formed comes back with that key and
// the request's digest (the audit record names them), and a conflict with
// the key of the operation already under it; never with an operation, so
// no caller mistakes it for an answer.
func TestARefusalAfterTheKeyIsFormedComesBackWithTheKey(t *testing.T) {
	ex, st, _ := newExecutor(t, smallBudget())
	tool := &scripted{}
	want, err := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, tool.Name(), "op-00000001")
	require.NoError(t, err)

	t.Run("no time left before the insert", func(t *testing.T) {
		// A deadline inside the reserve: nothing may be recorded or sent.
		ctx, cancel := context.WithTimeout(context.Background(), smallBudget().Reserve/2)
		defer cancel()
		sub, err := ex.Submit(ctx, tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
		var f *tools.Failure
		require.ErrorAs(t, err, &f)
		assert.Equal(t, tools.CodeTemporaryUnavailable, f.Code)
		assert.Equal(t, want, sub.Key)
		assert.NotEmpty(t, sub.Digest)
		assert.Empty(t, sub.Operation.Handle, "no operation")
		assert.Zero(t, sub.Refused)
		_, err = st.Get(context.Background(), want.Handle())
		assert.ErrorIs(t, err, store.ErrNotFound, "nothing recorded")
	})
	t.Run("a conflict", func(t *testing.T) {
		first, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f1","operation_id":"op-00000001"}`), "")
		require.NoError(t, err)
		sub, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"f2","operation_id":"op-00000001"}`), "")
		var f *tools.Failure
		require.ErrorAs(t, err, &f)
		assert.Equal(t, tools.CodeIdempotencyConflict, f.Code)
		assert.Equal(t, want, sub.Key)
		assert.Equal(t, first.Operation.Key, sub.Refused, "the operation already under the key")
		assert.NotEqual(t, first.Digest, sub.Digest, "the conflicting request's own digest")
		assert.Empty(t, sub.Operation.Handle, "no operation")
	})
	t.Run("an intent the operation refuses", func(t *testing.T) {
		// A business key over the bound: refused before anything is written.
		long := strings.Repeat("x", operation.MaxBusinessKeyLen)
		other, err := operation.NewRequestKey(alice.ClientID, alice.TenantID, alice.UserID, tool.Name(), "op-00000002")
		require.NoError(t, err)
		sub, err := ex.Submit(context.Background(), tool, alice, json.RawMessage(`{"fact":"`+long+`","operation_id":"op-00000002"}`), "")
		var f *tools.Failure
		require.ErrorAs(t, err, &f)
		assert.Equal(t, tools.CodeInvalidArgument, f.Code)
		assert.Contains(t, f.Message, "business_key")
		assert.Equal(t, other, sub.Key)
		assert.NotEmpty(t, sub.Digest)
		assert.Empty(t, sub.Operation.Handle, "no operation")
		assert.Zero(t, sub.Refused)
		_, err = st.Get(context.Background(), other.Handle())
		assert.ErrorIs(t, err, store.ErrNotFound, "nothing recorded")
	})
}
