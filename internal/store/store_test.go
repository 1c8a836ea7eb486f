package store_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testsync"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

var t0 = time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC)

type fixture struct {
	st    *store.Store
	db    *dynamodb.Client
	table string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	st := engine.NewStore(t)
	require.NoError(t, st.EnsureTable(ctx), "EnsureTable must be idempotent")
	db, err := engine.Client(ctx)
	require.NoError(t, err)
	return fixture{st: st, db: db, table: st.Table()}
}

// insert stores a new operation and requires it to be the first of its
// keys.
func (f fixture) insert(t *testing.T, op operation.Operation) {
	t.Helper()
	res, err := f.st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, store.Inserted, res.Kind)
}

func newOp(t *testing.T, client, opID, businessKey, reason string) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(client, "M1", "alice", "request_risk_review", opID)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(key.Tool, "alice", map[string]string{"order_id": "O20260728001", "reason": reason})
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: businessKey, RequestDigest: digest, EndUserID: "alice", TenantID: "M1",
		Target: map[string]string{"order_id": "O20260728001"}, Payload: map[string]string{"reason": reason},
	}, t0, 30*time.Second)
	require.NoError(t, err)
	return op
}

func (f fixture) rawItem(t *testing.T, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
	})
	require.NoError(t, err)
	return out.Item
}

func (f fixture) itemCount(t *testing.T) int {
	t.Helper()
	// A Scan is fine in a test that counts what a refused write left behind.
	// The recorded shard counts are the table's, not any operation's.
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.table), Select: types.SelectCount,
		FilterExpression:          aws.String("NOT begins_with(pk, :meta)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":meta": &types.AttributeValueMemberS{Value: "meta#"}}})
	require.NoError(t, err)
	return int(out.Count)
}

func TestInsertThenReplayReturnsTheStoredOperation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "risk_review|O20260728001|standard|g1", "chargeback")
	res, err := f.st.InsertIfAbsent(ctx, op)
	require.NoError(t, err)
	assert.Equal(t, store.Inserted, res.Kind)

	again := newOp(t, "client-a", "op-00000001", "risk_review|O20260728001|standard|g1", "chargeback")
	res, err = f.st.InsertIfAbsent(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, store.Replay, res.Kind)
	assert.Equal(t, op.Handle, res.Operation.Handle)
	assert.Equal(t, op.Journal, res.Operation.Journal)

	got, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Equal(t, op.RequestDigest, got.RequestDigest)
	assert.Equal(t, op.Payload, got.Payload)
	assert.True(t, op.DueAt.Equal(got.DueAt))
}

func TestSameBusinessKeyFrom64RequestKeysInsertsExactlyOne(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const n = 64
	ops := make([]operation.Operation, n)
	for i := range n {
		ops[i] = newOp(t, "client-a", fmt.Sprintf("op-race-%04d", i), "risk_review|O20260728001|standard|g1", "chargeback")
	}
	results := make([]store.InsertResult, n)
	errs := make([]error, n)
	testsync.Race(n, func(i int) { results[i], errs[i] = f.st.InsertIfAbsent(ctx, ops[i]) })

	var winner string
	kinds := map[store.InsertKind]int{}
	for i := range n {
		require.NoError(t, errs[i])
		kinds[results[i].Kind]++
		if results[i].Kind == store.Inserted {
			winner = results[i].Operation.Handle
		}
	}
	assert.Equal(t, map[store.InsertKind]int{store.Inserted: 1, store.BusinessKeyHeld: n - 1}, kinds)
	for i := range n {
		assert.Equal(t, winner, results[i].Operation.Handle, "every loser gets the winner's operation")
	}
	assert.Equal(t, 2+n-1, f.itemCount(t), "one operation item, one business-key item and a binding per deduplicated key")
}

func Test64RacersOnOneTransitionExactlyOneWins(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|race", "r")
	f.insert(t, op)

	const n = 64
	errs := make([]error, n)
	testsync.Race(n, func(i int) {
		_, errs[i] = f.st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second), Actor: fmt.Sprint(i)})
	})
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		var stale *store.StaleError
		require.ErrorAs(t, err, &stale)
		assert.ErrorIs(t, err, store.ErrStale)
	}
	assert.Equal(t, 1, wins)
	got, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Version)
	assert.Len(t, got.Journal, 3, "exactly one journal event appended")
}

func TestLateTimeoutCannotOverwriteSucceeded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|late", "r")
	f.insert(t, op)
	done, err := f.st.Transition(ctx, op, operation.Event{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second), ResourceID: "rv-1"})
	require.NoError(t, err)

	// The late event was computed from the PENDING version it saw.
	_, err = f.st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(2 * time.Second)})
	var stale *store.StaleError
	require.ErrorAs(t, err, &stale)
	require.NotNil(t, stale.Current)
	assert.Equal(t, operation.StateSucceeded, stale.Current.State)

	// And from the SUCCEEDED version it is illegal outright.
	_, err = f.st.Transition(ctx, done, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(3 * time.Second)})
	require.ErrorIs(t, err, operation.ErrIllegalTransition)

	got, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, got.Outcome)
	assert.Equal(t, "rv-1", got.ResourceID)
}

func TestFailedReleasesTheBusinessKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728001|standard|g1"
	first := newOp(t, "client-a", "op-00000001", bk, "r")
	f.insert(t, first)

	second := newOp(t, "client-a", "op-00000002", bk, "r")
	res, err := f.st.InsertIfAbsent(ctx, second)
	require.NoError(t, err)
	require.Equal(t, store.BusinessKeyHeld, res.Kind)

	failed, err := f.st.Transition(ctx, first, operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, failed.State)
	assert.Empty(t, f.rawItem(t, "bk#request_risk_review|"+bk), "business key deleted in the same transaction")
	assert.Contains(t, f.rawItem(t, "op#"+first.Handle), "expires_at", "a FAILED operation gets a TTL")

	// The key answered by deduplication keeps that answer.
	res, err = f.st.InsertIfAbsent(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, store.Replay, res.Kind)
	assert.True(t, res.Bound)
	assert.Equal(t, first.Handle, res.Operation.Handle)
	assert.Equal(t, operation.StateFailed, res.Operation.State)

	// A key never answered may try the released fact again.
	third := newOp(t, "client-a", "op-00000003", bk, "r")
	res, err = f.st.InsertIfAbsent(ctx, third)
	require.NoError(t, err)
	assert.Equal(t, store.Inserted, res.Kind)
}

func TestSucceededKeepsItsBusinessKeyForever(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|keep", "r")
	f.insert(t, op)
	_, err := f.st.Transition(ctx, op, operation.Event{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second)})
	require.NoError(t, err)
	bk := f.rawItem(t, "bk#request_risk_review|bk|keep")
	require.NotEmpty(t, bk)
	assert.NotContains(t, bk, "expires_at", "an expired claim would let the same fact be created again")
	assert.NotContains(t, f.rawItem(t, "op#"+op.Handle), "expires_at")
}

// lostAnswer applies the first UpdateItem of an operation at the engine,
// then loses its answer the way a reset connection does; the SDK retries
// the same request.
type lostAnswer struct {
	next    dynamodb.HTTPClient
	dropped atomic.Bool
}

func (c *lostAnswer) Do(req *http.Request) (*http.Response, error) {
	ofOperation := enginetest.NamesOperation(req)
	resp, err := c.next.Do(req)
	if err == nil && ofOperation && strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".UpdateItem") && c.dropped.CompareAndSwap(false, true) {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, err
}

func TestOwnAppliedTransitionWithALostAnswerIsSuccessNotStale(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	flaky := &lostAnswer{}
	db := dynamodb.New(f.db.Options(), func(o *dynamodb.Options) {
		flaky.next = o.HTTPClient
		o.HTTPClient = flaky
	})
	st, err := store.New(db, store.Config{Table: f.table})
	require.NoError(t, err)
	op := newOp(t, "client-a", "op-00000001", "bk|lost", "r")
	f.insert(t, op)

	next, err := st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second)})
	require.NoError(t, err, "the engine applied our write; the retry's failed condition must not turn it into a lost race")
	require.True(t, flaky.dropped.Load(), "the answer was really lost and retried")
	assert.Equal(t, operation.StateUnknown, next.State)
	stored, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Equal(t, int64(2), stored.Version, "applied once")

	// Another writer's identical-looking event is still a lost race.
	_, err = f.st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second)})
	require.ErrorIs(t, err, store.ErrStale)
}

func TestDigestConflictLeavesTheStoredItemUnchanged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|conflict", "original reason")
	f.insert(t, op)
	before := f.rawItem(t, "op#"+op.Handle)
	bkBefore := f.rawItem(t, "bk#request_risk_review|bk|conflict")

	changed := newOp(t, "client-a", "op-00000001", "bk|conflict", "changed reason")
	res, err := f.st.InsertIfAbsent(ctx, changed)
	require.NoError(t, err)
	assert.Equal(t, store.Conflict, res.Kind)
	assert.Equal(t, op.RequestDigest, res.Operation.RequestDigest)

	assert.Equal(t, before, f.rawItem(t, "op#"+op.Handle))
	assert.Equal(t, bkBefore, f.rawItem(t, "bk#request_risk_review|bk|conflict"))
	assert.Equal(t, 2, f.itemCount(t))
}

func TestOtherClientsSameOperationIDNeverCollides(t *testing.T) {
	f := newFixture(t)
	f.insert(t, newOp(t, "client-a", "op-00000001", "bk|a", "r"))
	f.insert(t, newOp(t, "client-b", "op-00000001", "bk|b", "other"))
}

func TestSparseIndexHoldsOnlyDueWork(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|due", "r")
	f.insert(t, op)
	assert.Contains(t, f.rawItem(t, "op#"+op.Handle), "gsi1pk", "PENDING carries its lease in the index")

	page, err := f.st.Due(ctx, t0.Add(10*time.Second), 10, "")
	require.NoError(t, err)
	assert.Empty(t, page.Operations, "lease not yet expired")

	unknown, err := f.st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second), NextAt: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	page, err = f.st.Due(ctx, t0.Add(4*time.Second), 10, "")
	require.NoError(t, err)
	assert.Empty(t, page.Operations, "not due before its next probe")
	page, err = f.st.Due(ctx, t0.Add(5*time.Second), 10, "")
	require.NoError(t, err)
	require.Len(t, page.Operations, 1)
	assert.Equal(t, operation.StateUnknown, page.Operations[0].State)

	_, err = f.st.Transition(ctx, unknown, operation.Event{Type: operation.EventProbeFoundOne, At: t0.Add(6 * time.Second), ResourceID: "rv-1"})
	require.NoError(t, err)
	item := f.rawItem(t, "op#"+op.Handle)
	assert.NotContains(t, item, "gsi1pk")
	assert.NotContains(t, item, "gsi1sk")
	page, err = f.st.Due(ctx, t0.Add(time.Hour), 10, "")
	require.NoError(t, err)
	assert.Empty(t, page.Operations)
	assert.Zero(t, page.ItemsRead)
}

func TestDuePagesThroughOnlyWhatIsDue(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var dueHandles []string
	for i := range 7 {
		op := newOp(t, "client-a", fmt.Sprintf("op-page-%04d", i), fmt.Sprintf("bk|%d", i), "r")
		f.insert(t, op)
		ev := operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second), NextAt: t0.Add(time.Duration(i) * time.Minute)}
		if i == 6 {
			ev = operation.Event{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second)}
		}
		_, err := f.st.Transition(ctx, op, ev)
		require.NoError(t, err)
		if i < 4 {
			dueHandles = append(dueHandles, op.Handle)
		}
	}
	var got []string
	cursor, pages, read := "", 0, 0
	for {
		page, err := f.st.Due(ctx, t0.Add(3*time.Minute), 3, cursor)
		require.NoError(t, err)
		pages++
		read += page.ItemsRead
		for _, op := range page.Operations {
			got = append(got, op.Handle)
		}
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
		require.Less(t, pages, 5, "paging must end")
	}
	assert.Equal(t, dueHandles, got, "oldest first, only due ones")
	// A page re-reads what the previous one read from a shard but left for
	// a later page; the reader the sweep uses reads each item once.
	assert.LessOrEqual(t, read, 2*len(dueHandles), "the query reads only due items")
	r := f.st.NewDueReader(t0.Add(3*time.Minute), store.DueReaderOptions{PageLimit: 3})
	for {
		_, ok, err := r.Next(ctx)
		require.NoError(t, err)
		if !ok {
			break
		}
	}
	assert.Equal(t, len(dueHandles), r.ItemsRead(), "only due items, each once")
}

func TestBadInputIsRefusedBeforeAnyWrite(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	good := newOp(t, "client-a", "op-00000001", "bk|good", "r")
	cases := map[string]func(*operation.Operation){
		"empty operation id":      func(o *operation.Operation) { o.Key.OperationID = "" },
		"overlong operation id":   func(o *operation.Operation) { o.Key.OperationID = strings.Repeat("a", 129) },
		"ill-formed operation id": func(o *operation.Operation) { o.Key.OperationID = "bad key!" },
		"empty client":            func(o *operation.Operation) { o.Key.ClientID = "" },
		"empty business key":      func(o *operation.Operation) { o.BusinessKey = "" },
		"overlong business key":   func(o *operation.Operation) { o.BusinessKey = strings.Repeat("b", 600) },
		"bad digest":              func(o *operation.Operation) { o.RequestDigest = "sha256:xyz" },
		"handle not derived":      func(o *operation.Operation) { o.Handle = "op_aaaaaaaaaaaaaaaaaaaaaaaaaa" },
		"not pending":             func(o *operation.Operation) { o.State = operation.StateSucceeded },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			op := good
			mutate(&op)
			_, err := f.st.InsertIfAbsent(ctx, op)
			require.ErrorIs(t, err, operation.ErrInvalid)
		})
	}
	_, err := f.st.Get(ctx, "not-a-handle")
	require.ErrorIs(t, err, operation.ErrInvalid)
	_, err = f.st.Due(ctx, t0, 0, "")
	require.ErrorIs(t, err, operation.ErrInvalid)
	_, err = f.st.Due(ctx, t0, 10, "%%%")
	require.ErrorIs(t, err, operation.ErrInvalid)
	assert.Equal(t, 0, f.itemCount(t), "nothing written")

	// A journal at its bound: the transition is refused and nothing changes.
	f.insert(t, good)
	before := f.rawItem(t, "op#"+good.Handle)
	full := good
	for len(full.Journal) < operation.MaxJournal {
		full.Journal = append(full.Journal, operation.Event{Type: operation.EventProbeInconclusive, At: t0})
	}
	_, err = f.st.Transition(ctx, full, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second)})
	require.ErrorIs(t, err, operation.ErrJournalFull)
	assert.Equal(t, before, f.rawItem(t, "op#"+good.Handle))
}

func TestGetUnknownHandleIsNotFound(t *testing.T) {
	f := newFixture(t)
	key, err := operation.NewRequestKey("client-a", "M1", "alice", "request_risk_review", "op-missing-1")
	require.NoError(t, err)
	_, err = f.st.GetByKey(context.Background(), key)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestClaimBeforeNextRetryAtIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000001", "bk|claim", "r")
	f.insert(t, op)
	retryable, err := f.st.Transition(ctx, op, operation.Event{Type: operation.EventNotDispatched, At: t0.Add(time.Second), NextAt: t0.Add(time.Minute)})
	require.NoError(t, err)

	_, err = f.st.Transition(ctx, retryable, operation.Event{Type: operation.EventRetryClaimed, At: t0.Add(30 * time.Second), LeaseUntil: t0.Add(2 * time.Minute)})
	require.ErrorIs(t, err, store.ErrStale, "next_retry_at has not passed")
	claimed, err := f.st.Transition(ctx, retryable, operation.Event{Type: operation.EventRetryClaimed, At: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, operation.StatePending, claimed.State)
	assert.Equal(t, 1, claimed.RetryCount)
}

func TestKeysDeduplicatedOntoOneHolderAtOnceAreEachBoundToIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728009|standard|g1"
	holder := newOp(t, "client-a", "op-holder-0001", bk, "r")
	f.insert(t, holder)
	const n = 16
	results := make([]store.InsertResult, n)
	errs := make([]error, n)
	testsync.Race(n, func(i int) {
		results[i], errs[i] = f.st.InsertIfAbsent(ctx, newOp(t, "client-a", fmt.Sprintf("op-dedup-%04d", i), bk, "r"))
	})
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, store.BusinessKeyHeld, results[i].Kind)
		assert.Equal(t, holder.Handle, results[i].Operation.Handle)
	}
	for i := range n {
		res, err := f.st.InsertIfAbsent(ctx, newOp(t, "client-a", fmt.Sprintf("op-dedup-%04d", i), bk, "other reason"))
		require.NoError(t, err)
		assert.Equal(t, store.Conflict, res.Kind, "key %d is bound to the digest it was answered for", i)
		assert.True(t, res.Bound)
	}
	assert.Equal(t, 2+n, f.itemCount(t))
}

// A key whose caller may not be answered with the holder is refused, not
// answered, and stays free: no binding is written, and once the holder has
// failed (the fact free again) the same key inserts its own operation.
func TestAKeyIsNotBoundToAHolderItMayNotBeAnsweredWith(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728012|standard|g1"
	holder := newOp(t, "client-a", "op-holder-0003", bk, "r")
	f.insert(t, holder)
	never := store.BindOnlyTo(func(operation.Operation) bool { return false })
	refused := newOp(t, "client-b", "op-refused-001", bk, "r")
	res, err := f.st.InsertIfAbsent(ctx, refused, never)
	require.NoError(t, err)
	assert.Equal(t, store.BusinessKeyHeld, res.Kind)
	assert.True(t, res.Unbound)
	assert.Equal(t, holder.Handle, res.Operation.Handle)
	assert.Empty(t, f.rawItem(t, "op#"+refused.Handle), "no binding is written for a refused key")

	_, err = f.st.Transition(ctx, holder, operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second), Detail: "rejected"})
	require.NoError(t, err)
	res, err = f.st.InsertIfAbsent(ctx, refused, never)
	require.NoError(t, err)
	assert.Equal(t, store.Inserted, res.Kind, "the fact is free again and the key was never bound")

	// Without the rule, a held fact binds the key, as before.
	other := newOp(t, "client-c", "op-bound-0001", bk, "r")
	res, err = f.st.InsertIfAbsent(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, store.BusinessKeyHeld, res.Kind)
	assert.False(t, res.Unbound)
	assert.NotEmpty(t, f.rawItem(t, "op#"+other.Handle))
}

func TestOneKeyRacingWithTwoDigestsWhileTheFactIsHeldIsBoundToOne(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728011|standard|g1"
	f.insert(t, newOp(t, "client-a", "op-holder-0002", bk, "r"))
	const n = 16
	reasons := []string{"reason a", "reason b"}
	results := make([]store.InsertResult, n)
	errs := make([]error, n)
	testsync.Race(n, func(i int) {
		results[i], errs[i] = f.st.InsertIfAbsent(ctx, newOp(t, "client-a", "op-contested-01", bk, reasons[i%2]))
	})
	kinds := map[string]map[store.InsertKind]int{reasons[0]: {}, reasons[1]: {}}
	for i := range n {
		require.NoError(t, errs[i])
		kinds[reasons[i%2]][results[i].Kind]++
	}
	// Exactly one digest won the binding; every call with it got the
	// deduplicated answer, every call with the other a conflict.
	winner, loser := reasons[0], reasons[1]
	if kinds[loser][store.BusinessKeyHeld] > 0 {
		winner, loser = loser, winner
	}
	assert.Equal(t, 1, kinds[winner][store.BusinessKeyHeld], "one binding write: %v", kinds)
	assert.Equal(t, n/2-1, kinds[winner][store.Replay], "%v", kinds)
	assert.Equal(t, n/2, kinds[loser][store.Conflict], "%v", kinds)
	assert.Equal(t, 3, f.itemCount(t), "holder, business key, one binding")
}

// afterFirst runs hook once, after the engine answered the first request
// of action and before the store sees that answer: another writer moving
// between the engine's decision and the store's reading of it.
type afterFirst struct {
	next   dynamodb.HTTPClient
	action string
	hook   func()
	done   atomic.Bool
}

func (c *afterFirst) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err == nil && strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+c.action) && c.done.CompareAndSwap(false, true) {
		c.hook()
	}
	return resp, err
}

func TestHolderFailingBetweenTheRefusedInsertAndTheBindingLetsTheKeyInsert(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728012|standard|g1"
	holder := newOp(t, "client-a", "op-holder-0003", bk, "r")
	f.insert(t, holder)

	racing := &afterFirst{action: "TransactWriteItems", hook: func() {
		// The holder is rejected (FAILED, business key released) right
		// after the engine refused our insert for the held key.
		_, err := f.st.Transition(ctx, holder, operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
		require.NoError(t, err)
	}}
	st := f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { racing.next = next; return racing })
	insertsItsOwn(t, st, newOp(t, "client-a", "op-after-fail-1", bk, "r"), &racing.done)
}

// insertsItsOwn inserts mine through st, whose wrapper made its holder fail
// inside the insert (hooked says it did), and requires mine's own
// operation: a key is never bound to a holder proven without effect.
func insertsItsOwn(t *testing.T, st *store.Store, mine operation.Operation, hooked *atomic.Bool) {
	t.Helper()
	res, err := st.InsertIfAbsent(context.Background(), mine)
	require.NoError(t, err)
	require.True(t, hooked.Load(), "the holder failed inside the insert")
	assert.Equal(t, store.Inserted, res.Kind, "a key is never bound to a holder proven without effect")
	assert.Equal(t, mine.Handle, res.Operation.Handle)
}

// Seed 20261201 of the fault campaign: a key first answered by
// deduplication with a reason other than the holder's keeps that answer
// for its own arguments, and the holder's arguments under it are a
// conflict, not a second deduplication (the store side of the checker fix).
func TestABoundKeyIsJudgedByItsOwnFirstDigestNotTheHolders(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728084|standard|g1"
	holder := newOp(t, "client-a", "op-holder-0084", bk, "velocity")
	f.insert(t, holder)
	bound := newOp(t, "client-a", "op-bound-0084", bk, "manual check")
	res, err := f.st.InsertIfAbsent(ctx, bound)
	require.NoError(t, err)
	require.Equal(t, store.BusinessKeyHeld, res.Kind)

	res, err = f.st.InsertIfAbsent(ctx, newOp(t, "client-a", "op-bound-0084", bk, "manual check"))
	require.NoError(t, err)
	assert.Equal(t, store.Replay, res.Kind)
	assert.True(t, res.Bound)
	assert.Equal(t, holder.Handle, res.Operation.Handle)

	res, err = f.st.InsertIfAbsent(ctx, newOp(t, "client-a", "op-bound-0084", bk, "velocity"))
	require.NoError(t, err)
	assert.Equal(t, store.Conflict, res.Kind, "the holder's arguments are other arguments for this key")
	assert.True(t, res.Bound)
}

// Retention is for proven no-effect only: FAILED expires Retention after its
// last update; an operation still owed work or an operator's decision never
// expires under anyone.
func TestOnlyFailedOperationsExpireRetentionAfterTheirLastUpdate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const retention = 48 * time.Hour
	st, err := store.New(f.db, store.Config{Table: f.table, Retention: retention})
	require.NoError(t, err)

	failing := newOp(t, "client-a", "op-ttl-fail-01", "bk|ttl-fail", "r")
	f.insert(t, failing)
	failedAt := t0.Add(7 * time.Second)
	_, err = st.Transition(ctx, failing, operation.Event{Type: operation.EventBusinessRejected, At: failedAt})
	require.NoError(t, err)
	assert.Equal(t, &types.AttributeValueMemberN{Value: fmt.Sprint(failedAt.Add(retention).Unix())},
		f.rawItem(t, "op#"+failing.Handle)["expires_at"])

	escalating := newOp(t, "client-a", "op-ttl-esc-01", "bk|ttl-esc", "r")
	f.insert(t, escalating)
	assert.NotContains(t, f.rawItem(t, "op#"+escalating.Handle), "expires_at", "PENDING")
	unknown, err := st.Transition(ctx, escalating, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second)})
	require.NoError(t, err)
	assert.NotContains(t, f.rawItem(t, "op#"+escalating.Handle), "expires_at", "UNKNOWN")
	escalated, err := st.Transition(ctx, unknown, operation.Event{Type: operation.EventProbeMultiple, At: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, escalated.State)
	assert.NotContains(t, f.rawItem(t, "op#"+escalating.Handle), "expires_at", "ESCALATED")
	assert.NotEmpty(t, f.rawItem(t, "bk#request_risk_review|bk|ttl-esc"), "an escalated operation keeps its business key")
}

// A withdrawal's audit is work like any other: the withdrawn operation is
// in the due index until the audit ends, and its retention starts only
// then, so no audit is lost to an expiry. Its business key is released at
// once: the fact may be asked for again.
func TestAWithdrawnOperationAwaitingItsAuditIsDueAndKept(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const retention = 48 * time.Hour
	st, err := store.New(f.db, store.Config{Table: f.table, Retention: retention})
	require.NoError(t, err)
	auditAt := t0.Add(40 * time.Second)
	withdrawn := f.withdrawnAwaitingAudit(t, st, "op-withdraw-01", "bk|withdraw", auditAt)

	assert.NotContains(t, f.rawItem(t, "op#"+withdrawn.Handle), "expires_at", "awaiting its audit")
	assert.Empty(t, f.rawItem(t, "bk#request_risk_review|bk|withdraw"), "the fact is released at once")
	page, err := st.Due(ctx, auditAt.Add(-time.Millisecond), 10, "")
	require.NoError(t, err)
	assert.Empty(t, page.Operations, "not due before the audit")
	page, err = st.Due(ctx, auditAt, 10, "")
	require.NoError(t, err)
	require.Len(t, page.Operations, 1)
	assert.Equal(t, operation.StateFailed, page.Operations[0].State)

	cleanAt := auditAt.Add(time.Second)
	_, err = st.Transition(ctx, withdrawn, operation.Event{Type: operation.EventAuditClean, At: cleanAt})
	require.NoError(t, err)
	item := f.rawItem(t, "op#"+withdrawn.Handle)
	assert.NotContains(t, item, "gsi1pk")
	assert.Equal(t, &types.AttributeValueMemberN{Value: fmt.Sprint(cleanAt.Add(retention).Unix())}, item["expires_at"])
}

// A withdrawal's audit that ends for an operator leaves the due index but
// keeps its record past the retention, as an effect reported after failure
// does: the operator's closing starts the retention.
func TestAWithdrawnOperationWhoseAuditEndedForAnOperatorIsKeptUntilClosed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const retention = 48 * time.Hour
	st, err := store.New(f.db, store.Config{Table: f.table, Retention: retention})
	require.NoError(t, err)
	withdrawn := f.withdrawnAwaitingAudit(t, st, "op-withdraw-02", "bk|withdraw-exhausted", t0.Add(40*time.Second))

	exhausted, err := st.Transition(ctx, withdrawn, operation.Event{Type: operation.EventAuditExhausted, At: t0.Add(time.Minute)})
	require.NoError(t, err)
	item := f.rawItem(t, "op#"+withdrawn.Handle)
	assert.NotContains(t, item, "gsi1pk", "no longer the reconciler's")
	assert.NotContains(t, item, "expires_at", "an operator must close it first")

	closedAt := t0.Add(time.Hour)
	_, err = st.Transition(ctx, exhausted, operation.Event{Type: operation.EventOperatorFailed, At: closedAt, Actor: "oncall"})
	require.NoError(t, err)
	assert.Equal(t, &types.AttributeValueMemberN{Value: fmt.Sprint(closedAt.Add(retention).Unix())}, f.rawItem(t, "op#"+withdrawn.Handle)["expires_at"])
}

// withdrawnAwaitingAudit stores an operation whose create timed out, was
// proven absent past its horizon and was withdrawn by its owner, its
// withdrawal's audit due at auditAt.
func (f fixture) withdrawnAwaitingAudit(t *testing.T, st *store.Store, opID, businessKey string, auditAt time.Time) operation.Operation {
	t.Helper()
	ctx := context.Background()
	op := newOp(t, "client-a", opID, businessKey, "r")
	f.insert(t, op)
	unknown, err := st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second), NextAt: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	retryable, err := st.Transition(ctx, unknown, operation.Event{Type: operation.EventProbeNotFound, At: t0.Add(5 * time.Second),
		NextAt: t0.Add(7 * time.Second), LateCommitsBounded: true})
	require.NoError(t, err)
	withdrawn, err := st.Transition(ctx, retryable, operation.Event{Type: operation.EventClientCancelled, At: t0.Add(6 * time.Second), NextAt: auditAt})
	require.NoError(t, err)
	require.True(t, withdrawn.WithdrawalAuditPending())
	return withdrawn
}

// conflicting answers the first `times` requests of action itself, as
// DynamoDB does when another transaction holds one of their items: a
// transaction cancelled whole with a TransactionConflict reason, a single
// write refused with TransactionConflictException; nothing applied. The
// local engine runs one request at a time and never answers this.
// times < 0: every one.
type conflicting struct {
	next   dynamodb.HTTPClient
	action string
	times  int
	seen   atomic.Int32
}

const (
	transactionConflictCancel = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",` +
		`"Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]",` +
		`"CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"},{"Code":"None"}]}`
	transactionConflictWrite = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException",` +
		`"message":"Transaction is ongoing for the item"}`
)

func (c *conflicting) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+c.action) || !enginetest.NamesOperation(req) {
		return c.next.Do(req)
	}
	n := int(c.seen.Add(1))
	if c.times >= 0 && n > c.times {
		return c.next.Do(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := transactionConflictWrite
	if c.action == "TransactWriteItems" {
		body = transactionConflictCancel
	}
	return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"conflict-test"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

func (f fixture) storeThrough(t *testing.T, wrap func(dynamodb.HTTPClient) dynamodb.HTTPClient) *store.Store {
	t.Helper()
	db := dynamodb.New(f.db.Options(), func(o *dynamodb.Options) { o.HTTPClient = wrap(o.HTTPClient) })
	st, err := store.New(db, store.Config{Table: f.table})
	require.NoError(t, err)
	return st
}

// A transaction DynamoDB cancels for a conflict with another one applied
// nothing and says nothing final: the insert is tried again and lands once.
func TestAnInsertCancelledByATransactionConflictIsTriedAgainAndLandsOnce(t *testing.T) {
	f := newFixture(t)
	c := &conflicting{action: "TransactWriteItems", times: 2}
	st := f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { c.next = next; return c })
	op := newOp(t, "client-a", "op-conflict-01", "bk|conflict-then-free", "r")
	res, err := st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	assert.Equal(t, store.Inserted, res.Kind)
	assert.EqualValues(t, 3, c.seen.Load(), "two cancelled attempts, then the one that landed")
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stored.Version)
}

// When the conflict outlasts the retries, every attempt was cancelled
// whole: the caller is told nothing was written (so "nothing was recorded
// or sent; retry with the same operation_id"), not that the outcome is
// unknown, and indeed nothing is in the table.
func TestAnInsertWhoseTransactionConflictPersistsSaysNothingWasWritten(t *testing.T) {
	f := newFixture(t)
	c := &conflicting{action: "TransactWriteItems", times: -1}
	st := f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { c.next = next; return c })
	op := newOp(t, "client-a", "op-conflict-02", "bk|conflict-forever", "r")
	_, err := st.InsertIfAbsent(context.Background(), op)
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrNotWritten)
	_, err = f.st.Get(context.Background(), op.Handle)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// A transition refused because another transaction holds the item (the
// FAILED release of a business key, say) applied nothing and decided
// nothing: it is tried again, and lands or meets the other writer's version
// as stale. Given up, it says nothing was written.
func TestATransitionRefusedForATransactionConflictIsTriedAgain(t *testing.T) {
	for _, c := range []struct {
		name, action string
		event        operation.EventType
		state        operation.State
	}{
		{"an update", "UpdateItem", operation.EventClientTimeout, operation.StateUnknown},
		{"the FAILED release transaction", "TransactWriteItems", operation.EventBusinessRejected, operation.StateFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			op := newOp(t, "client-a", "op-conflict-10", "bk|transition-"+c.action, "r")
			f.insert(t, op)
			once := &conflicting{action: c.action, times: 1}
			st := f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { once.next = next; return once })
			next, err := st.Transition(ctx, op, operation.Event{Type: c.event, At: t0.Add(time.Second)})
			require.NoError(t, err)
			assert.Equal(t, c.state, next.State)
			assert.EqualValues(t, 2, once.seen.Load())
			stored, err := f.st.Get(ctx, op.Handle)
			require.NoError(t, err)
			assert.Equal(t, int64(2), stored.Version, "applied once")

			other := newOp(t, "client-a", "op-conflict-11", "bk|transition-forever-"+c.action, "r")
			f.insert(t, other)
			always := &conflicting{action: c.action, times: -1}
			st = f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { always.next = next; return always })
			_, err = st.Transition(ctx, other, operation.Event{Type: c.event, At: t0.Add(time.Second)})
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrNotWritten)
			stored, err = f.st.Get(ctx, other.Handle)
			require.NoError(t, err)
			assert.Equal(t, int64(1), stored.Version, "nothing applied")
		})
	}
}

// A verified effect a stale dispatcher reports after the operation FAILED
// is journalled on it. Its business key went when it failed and is another
// operation's now: the evidence must not touch it. And the item is kept
// past the retention, since it is the record of an effect that exists.
func TestEvidenceOnAFailedOperationIsKeptAndLeavesTheNextHoldersKeyAlone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728001|standard|g1"
	first := newOp(t, "client-a", "op-00000011", bk, "r")
	f.insert(t, first)
	failed, err := f.st.Transition(ctx, first, operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Contains(t, f.rawItem(t, "op#"+first.Handle), "expires_at")

	next := newOp(t, "client-a", "op-00000012", bk, "r")
	f.insert(t, next)

	got, err := f.st.Transition(ctx, failed, operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Minute),
		NextAt: t0.Add(time.Minute), Source: "stale_dispatcher", ResourceID: "rv-late"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, got.State)
	assert.Equal(t, []string{"rv-late"}, got.EffectsReportedAfterFailure())
	stored, err := f.st.Get(ctx, first.Handle)
	require.NoError(t, err)
	assert.Equal(t, got.Version, stored.Version)
	assert.NotContains(t, f.rawItem(t, "op#"+first.Handle), "expires_at", "the record of an effect outlives the retention")
	assert.NotContains(t, f.rawItem(t, "op#"+first.Handle), "gsi1pk", "nothing for the reconciler to do")
	holder, err := f.st.BusinessKeyHolder(ctx, "request_risk_review", bk)
	require.NoError(t, err)
	assert.Equal(t, next.Handle, holder, "the next operation keeps the fact")

	// An operator who removed the effect closes it: the retention applies
	// again, and the next holder still keeps the fact.
	closed, err := f.st.Transition(ctx, got, operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Minute), Actor: "oscar"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, closed.State)
	assert.Contains(t, f.rawItem(t, "op#"+first.Handle), "expires_at", "closed, it expires like any FAILED operation")
	holder, err = f.st.BusinessKeyHolder(ctx, "request_risk_review", bk)
	require.NoError(t, err)
	assert.Equal(t, next.Handle, holder, "closing it does not touch the fact either")
}

// afterTransactThenGet runs hook once, after the first GetItem that follows
// the first TransactWriteItems: between an insert refused for a held
// business key and the binding that follows the read of its holder.
type afterTransactThenGet struct {
	next     dynamodb.HTTPClient
	hook     func()
	transact atomic.Bool
	done     atomic.Bool
}

func (c *afterTransactThenGet) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	target := req.Header.Get("X-Amz-Target")
	if strings.HasSuffix(target, ".TransactWriteItems") {
		c.transact.Store(true)
	}
	if err == nil && strings.HasSuffix(target, ".GetItem") && c.transact.Load() && c.done.CompareAndSwap(false, true) {
		c.hook()
	}
	return resp, err
}

// withdrawable is a RETRYABLE operation proven unsent: its dispatch was
// refused before it left.
func (f fixture) withdrawable(t *testing.T, op operation.Operation) operation.Operation {
	t.Helper()
	f.insert(t, op)
	retryable, err := f.st.Transition(context.Background(), op, operation.Event{Type: operation.EventNotDispatched, At: t0.Add(time.Second)})
	require.NoError(t, err)
	require.True(t, retryable.EffectRuledOut())
	return retryable
}

// The holder is withdrawn after its read and before the binding: the key
// is not bound to a holder that failed meanwhile; the fact is free, and the
// key's own operation is inserted.
func TestAHolderWithdrawnBetweenItsReadAndTheBindingLetsTheKeyInsert(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728013|standard|g1"
	holder := f.withdrawable(t, newOp(t, "client-a", "op-holder-0004", bk, "r"))

	racing := &afterTransactThenGet{hook: func() {
		_, err := f.st.Transition(ctx, holder, operation.Event{Type: operation.EventClientCancelled, At: t0.Add(2 * time.Second)})
		require.NoError(t, err)
	}}
	st := f.storeThrough(t, func(next dynamodb.HTTPClient) dynamodb.HTTPClient { racing.next = next; return racing })
	insertsItsOwn(t, st, newOp(t, "client-a", "op-after-cancel1", bk, "r"), &racing.done)
}

// A binding counts on the business key's item, and a withdrawal of the
// holder written after it is refused by the store (ErrShared), nothing
// written. The binding wrote nothing on the holder: its version and its
// item are as they were, so the holder's own writers never met it.
func TestAWithdrawalWrittenAfterABindingIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bk := "risk_review|O20260728014|standard|g1"
	holder := f.withdrawable(t, newOp(t, "client-a", "op-holder-0005", bk, "r"))
	before := f.rawItem(t, "op#"+holder.Handle)
	res, err := f.st.InsertIfAbsent(ctx, newOp(t, "client-b", "op-bound-00005", bk, "r"))
	require.NoError(t, err)
	require.Equal(t, store.BusinessKeyHeld, res.Kind)
	assert.Equal(t, before, f.rawItem(t, "op#"+holder.Handle), "the binding leaves the holder's item alone")

	_, err = f.st.Transition(ctx, holder, operation.Event{Type: operation.EventClientCancelled, At: t0.Add(2 * time.Second)})
	require.ErrorIs(t, err, store.ErrShared)
	stored, err := f.st.Get(ctx, holder.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateRetryable, stored.State)
	assert.Equal(t, holder.Version, stored.Version)

	// Any other way to FAILED still releases the fact: the binding only
	// holds the owner's word back.
	_, err = f.st.Transition(ctx, stored, operation.Event{Type: operation.EventRetryBudgetExhausted, At: t0.Add(3 * time.Second)})
	require.NoError(t, err)
}

// A withdrawal and a binding of one holder at once: exactly one lands.
// Either the holder is withdrawn and the other key inserts its own
// operation, or the key is bound and the holder stays; never a key bound
// to a withdrawn holder.
func TestAWithdrawalAndABindingAtOnceNeverBothLand(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	withdrawn, bound := 0, 0
	for i := range 8 {
		bk := fmt.Sprintf("risk_review|O2026072810%d|standard|g1", i)
		holder := f.withdrawable(t, newOp(t, "client-a", fmt.Sprintf("op-holder-race-%d", i), bk, "r"))
		other := newOp(t, "client-b", fmt.Sprintf("op-other-race-%d", i), bk, "r")
		var res store.InsertResult
		var insertErr, cancelErr error
		testsync.Race(2, func(j int) {
			if j == 0 {
				_, cancelErr = f.st.Transition(ctx, holder, operation.Event{Type: operation.EventClientCancelled, At: t0.Add(2 * time.Second)})
				return
			}
			res, insertErr = f.st.InsertIfAbsent(ctx, other)
		})
		require.NoError(t, insertErr)
		stored, err := f.st.Get(ctx, holder.Handle)
		require.NoError(t, err)
		if cancelErr == nil {
			withdrawn++
			assert.Equal(t, operation.StateFailed, stored.State)
			assert.Equal(t, store.Inserted, res.Kind, "round %d: the fact was free, the key inserts its own", i)
			assert.Equal(t, other.Handle, res.Operation.Handle)
			continue
		}
		bound++
		require.ErrorIs(t, cancelErr, store.ErrShared, "round %d", i)
		assert.Equal(t, store.BusinessKeyHeld, res.Kind, "round %d", i)
		assert.Equal(t, operation.StateRetryable, stored.State, "round %d: a bound holder is not withdrawn", i)
	}
	t.Logf("withdrawn first %d times, bound first %d times", withdrawn, bound)
}

// The journal's bound keeps an item within DynamoDB's 400 KB: a journal
// filled to it, every event carrying an operator's longest evidence, is
// written and read whole. (DynamoDB counts UTF-8 bytes, so even four-byte
// characters throughout would be 80 x 4 KB; the local engine counts
// non-ASCII text differently, so the test writes ASCII.)
func TestAJournalAtItsBoundOfTheLongestEventsFitsInOneItem(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := newOp(t, "client-a", "op-00000002", "bk|long", "r")
	f.insert(t, op)
	op, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	op, err = f.st.Transition(ctx, op, operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second), NextAt: t0.Add(time.Minute)})
	require.NoError(t, err)
	longest := strings.Repeat("x", 1000) // the operator tool's MaxEvidenceRunes
	for i := 0; len(op.Journal) < operation.MaxJournal; i++ {
		op, err = f.st.Transition(ctx, op, operation.Event{Type: operation.EventProbeInconclusive, At: t0.Add(time.Duration(i+2) * time.Second),
			NextAt: t0.Add(time.Hour), Detail: longest})
		require.NoError(t, err, "event %d", i)
	}
	got, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Len(t, got.Journal, operation.MaxJournal)
}
