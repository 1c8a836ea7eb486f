package reconcile_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// writeSettled writes n settled operation items straight into the table
// with BatchWriteItem: no index attributes (as the store leaves a settled
// operation) and no transactions, which the engine would pay for by
// copying the table.
func (f fixture) writeSettled(t *testing.T, n int) {
	t.Helper()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk": s(fmt.Sprintf("op#settled-%06d", i)), "kind": s("operation"), "state": s("SUCCEEDED"),
				"outcome": s("committed_and_verified"), "version": &types.AttributeValueMemberN{Value: "3"},
			}}})
		}
		out, err := f.db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{f.table: reqs},
		})
		require.NoError(t, err)
		require.Empty(t, out.UnprocessedItems)
	}
}

func TestSweepOverThousandsOfSettledReadsOnlyTheDue(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	ctx := context.Background()

	// Inserts first: they are transactions, cheap while the table is small.
	var due []operation.Operation
	for i := range 5 {
		due = append(due, f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-due-%04d", i), orderID(10+i), time.Minute)))
	}
	for i := range 2 {
		f.storedOp(t, fmt.Sprintf("op-leased-%04d", i), orderID(20+i), time.Hour) // PENDING, lease holds
	}
	f.writeSettled(t, 2000)

	f.clock.Advance(riskreviewSettle + time.Second)
	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Examined)
	assert.Equal(t, 5, rep.ItemsRead, "only due items are read, never the settled ones")
	assert.Equal(t, 5, rep.Transitions)
	assert.Equal(t, 0, rep.Errors)
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
	for _, op := range due {
		got := f.get(t, op.Handle)
		assert.Equal(t, operation.StateRetryable, got.State, "never sent, so the authoritative lookup proves absence")
	}
	assert.Equal(t, 5, f.sim.Stats().LookupCalls)
	assert.Equal(t, 0, f.sim.Stats().CreateCalls, "a sweep probes; only a due RETRYABLE is claimed and sent")
}

func TestSweepStopsAtMaxPerInvocationAndPages(t *testing.T) {
	f := newFixture(t)
	svc, err := reconcile.New(reconcile.Config{
		Executor: f.exec, Families: map[string]tools.WriteTool{f.family.Name(): f.family},
		BatchLimit: 2, MaxPerInvocation: 3, Jitter: identity,
	})
	require.NoError(t, err)
	for i := range 4 {
		f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-page-%04d", i), orderID(30+i), time.Minute))
	}
	f.clock.Advance(time.Minute)
	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Examined)
	assert.Equal(t, reconcile.StoppedMax, rep.Stopped)

	rep, err = svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Examined, "the rest on the next invocation")
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
}

func TestSweepStopsWhenLessThanTheReserveRemains(t *testing.T) {
	f := newFixture(t)
	f.toUnknown(t, f.storedOp(t, "op-reserve-0001", orderID(40), time.Minute))
	f.clock.Advance(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // < default 2s reserve
	defer cancel()
	rep, err := f.service(t).Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Examined)
	assert.Equal(t, reconcile.StoppedDeadline, rep.Stopped)
}

func TestSweepReportsTheOldestUnknownItExaminedBeforeResolvingIt(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	// Oldest of all, but PENDING with a lost lease: not UNKNOWN, not counted.
	f.storedOp(t, "op-age-lease-0001", orderID(50), time.Minute)
	f.clock.Advance(time.Minute)
	oldest := f.toUnknown(t, f.storedOp(t, "op-age-0001", orderID(51), time.Minute))
	f.clock.Advance(4 * time.Minute)
	f.toUnknown(t, f.storedOp(t, "op-age-0002", orderID(52), time.Minute))
	f.clock.Advance(riskreviewSettle + time.Second)

	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Examined)
	assert.Equal(t, f.clock.Now().Sub(oldest.CreatedAt), rep.OldestUnknownAge)
	assert.Equal(t, 4*time.Minute+riskreviewSettle+time.Second, rep.OldestUnknownAge)
	assert.Equal(t, operation.StateRetryable, f.get(t, oldest.Handle).State,
		"the sweep resolved it, yet its age before deciding is what the report carries")
}

func TestSweepWithoutUnknownReportsZeroAge(t *testing.T) {
	f := newFixture(t)
	f.storedOp(t, "op-age-lease-0002", orderID(53), time.Minute)
	f.clock.Advance(2 * time.Minute)
	rep, err := f.service(t).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Examined, "the lost lease was examined")
	assert.Zero(t, rep.OldestUnknownAge)
}

// storedOpOf inserts a PENDING operation of tool straight into the store,
// as an MCP server with that tool switched on would.
func (f fixture) storedOpOf(t *testing.T, tool, operationID string, lease time.Duration) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, tool, operationID)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(tool, caller.UserID, map[string]string{"id": operationID})
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey("foreign", operationID, "x", "1")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: caller.UserID, TenantID: caller.TenantID,
		Target: map[string]string{"id": operationID}, Payload: map[string]string{"id": operationID},
	}, f.clock.Now(), lease)
	require.NoError(t, err)
	return insertNew(t, f.st, op)
}

// Operations of a tool this reconciler has no family for (ticket tools
// switched off here) are older than everything else and more than one
// invocation may examine: they must not starve the operation it can run.
func TestSweepIsNotBlockedByOperationsNoFamilyCanRun(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.BatchLimit, c.MaxPerInvocation = 2, 3 })
	var foreign []operation.Operation
	for i := range 5 {
		foreign = append(foreign, f.storedOpOf(t, release.ToolCreate, fmt.Sprintf("op-ticket-%04d", i), time.Minute))
	}
	f.clock.Advance(30 * time.Second)
	mine := f.storedOp(t, "op-mine-0001", orderID(60), time.Minute)
	f.clock.Advance(2 * time.Minute)

	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Errors)
	assert.Equal(t, 1, rep.Examined, "only the operation it can run counts against the bound")
	for _, op := range foreign {
		assert.Equal(t, store.ParkedKey(release.ToolCreate), f.indexKey(t, op.Handle))
	}
	assert.Equal(t, operation.StateUnknown, f.get(t, mine.Handle).State, "its lost lease was handled")
	for _, op := range foreign {
		got := f.get(t, op.Handle)
		assert.Equal(t, operation.StatePending, got.State)
		assert.Equal(t, op.DueAt, got.DueAt, "it keeps its due_at")
		assert.Equal(t, op.Version, got.Version)
	}
	assert.Equal(t, 5, rep.Unrunnable, "each is counted for the alarm")
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)

	// Parked, they are not read again by a reconciler without the family.
	f.clock.Advance(time.Minute)
	mine = f.storedOp(t, "op-mine-0002", orderID(61), time.Minute)
	f.clock.Advance(2 * time.Minute)
	rep, err = svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Unrunnable)
	assert.Equal(t, 0, rep.Errors)
	assert.Equal(t, rep.Examined, rep.ItemsRead, "every item read was one it can run: the parked entries are not read")
	assert.NotEqual(t, operation.StatePending, f.get(t, mine.Handle).State, "its lost lease was handled")

	// A reconciler that has the family finds them in their parked
	// partition, and its transition puts each back into its shard.
	tickets := release.New(f.releaseClient(t), policy.DeployGrants{}, release.RecoveryForLag(0))
	withTickets := f.service(t, f.family, tickets)
	rep, err = withTickets.Sweep(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rep.Examined, 5)
	assert.Equal(t, 0, rep.Unrunnable)
	assert.Equal(t, 0, rep.Errors)
	for _, op := range foreign {
		assert.NotEqual(t, operation.StatePending, f.get(t, op.Handle).State, "its lost lease was handled")
		assert.NotContains(t, f.indexKey(t, op.Handle), "parked#", "back in its shard")
	}
}

// indexKey is the due-index partition key of handle's item ("" if none).
func (f fixture) indexKey(t *testing.T, handle string) string {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &f.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + handle}},
	})
	require.NoError(t, err)
	if v, ok := out.Item["gsi1pk"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// releaseClient is a Release API client on a simulator that shares the
// fixture's clock.
func (f fixture) releaseClient(t *testing.T) *provider.ReleaseClient {
	t.Helper()
	sim := releaseapi.New(releaseapi.Config{APIKey: "release-test-key", Clock: f.clock.Now, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: server.URL, APIKey: "release-test-key", MaxConns: 4, Timeout: time.Second})
	require.NoError(t, err)
	return client
}

// storedOpIn inserts a PENDING risk review through st: another replica,
// configured with its own shard count. Each gets a business key of its own.
func (f fixture) storedOpIn(t *testing.T, st *store.Store, operationID, orderID string, lease time.Duration) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, riskreview.ToolRequest, operationID)
	require.NoError(t, err)
	args := map[string]string{"order_id": orderID, "reason": "r", "review_type": riskreview.ReviewType}
	digest, err := operation.RequestDigest(key.Tool, caller.UserID, args)
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey("risk_review", orderID+"-"+operationID, riskreview.ReviewType, riskreview.Generation)
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: caller.UserID, TenantID: caller.TenantID,
		Target: map[string]string{"order_id": orderID, "review_type": riskreview.ReviewType}, Payload: args,
	}, f.clock.Now(), lease)
	require.NoError(t, err)
	return insertNew(t, st, op)
}

func TestSweepFindsEntriesWrittenUnderEveryShardCountInUse(t *testing.T) {
	f := newFixture(t)
	var written []operation.Operation
	for _, shards := range []int{1, 4, 16} { // 1: the unsharded index's key
		st, err := store.New(f.db, store.Config{Table: f.table, DueShards: shards})
		require.NoError(t, err)
		for i := range 3 {
			written = append(written, f.storedOpIn(t, st, fmt.Sprintf("op-mixed-%02d-%d", shards, i), orderID(shards+i), time.Minute))
		}
	}
	f.clock.Advance(2 * time.Minute)
	rep, err := f.service(t).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
	assert.Equal(t, 0, rep.Errors)
	for _, op := range written {
		assert.NotEqual(t, operation.StatePending, f.get(t, op.Handle).State, "%s: its lost lease was handled", op.Key.OperationID)
	}
}

func TestSweepTakesTheOldestAcrossShardsWithinItsBound(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.MaxPerInvocation = 10 })
	var ops []operation.Operation
	for i := range 30 {
		ops = append(ops, f.storedOp(t, fmt.Sprintf("op-order-%04d", i), orderID(i), time.Minute))
		f.clock.Advance(time.Second) // each due one second after the previous
	}
	f.clock.Advance(2 * time.Minute)
	written, swept := f.st.DueShards()
	require.Equal(t, written, swept)

	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, reconcile.StoppedMax, rep.Stopped)
	assert.Equal(t, 10, rep.Examined)
	// Pages of one item per key here (ceil(10 / 17 keys)): what was read and
	// not examined is at most one page per key.
	assert.LessOrEqual(t, rep.ItemsRead, rep.Examined+swept+1)
	for i, op := range ops {
		moved := f.get(t, op.Handle).State != operation.StatePending
		assert.Equal(t, i < 10, moved, "op %d: the ten oldest, whatever their shards", i)
	}
}

// A deploy that raises INTENTGATE_DUE_SHARDS (16 -> 32) and is rolled back,
// or one that lowers it without raising INTENTGATE_DUE_SHARDS_SWEPT, leaves
// entries in shards the configured count does not reach; nothing else ever
// moves a lost lease or an UNKNOWN in backoff out of them. Every writer
// records the shard count it writes with, and the sweep reads every shard
// up to the largest ever recorded.
func TestSweepReachesShardsOfAnyCountAWriterEverUsed(t *testing.T) {
	f := newFixture(t)
	wide, err := store.New(f.db, store.Config{Table: f.table, DueShards: 32})
	require.NoError(t, err)
	var beyond []operation.Operation
	for i := 0; len(beyond) < 3 && i < 60; i++ {
		op := f.storedOpIn(t, wide, fmt.Sprintf("op-wide-%02d", i), orderID(i), time.Minute)
		if store.DueShardOf(op.Handle, 32) >= 16 {
			beyond = append(beyond, op)
		}
	}
	require.Len(t, beyond, 3)
	written, swept := f.st.DueShards()
	require.Equal(t, 16, written)
	require.Equal(t, 16, swept, "the reconciler is configured for 16 shards")

	f.clock.Advance(2 * time.Minute)
	rep, err := f.service(t).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
	for _, op := range beyond {
		assert.NotEqual(t, operation.StatePending, f.get(t, op.Handle).State, "%s in shard %d: its lost lease was handled",
			op.Key.OperationID, store.DueShardOf(op.Handle, 32))
	}
}
