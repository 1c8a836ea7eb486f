package reconcile_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// rawItem reads an operation's item as stored (consistent read).
func rawItem(t *testing.T, f fixture, handle string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + handle}},
	})
	require.NoError(t, err)
	return out.Item
}

// What needs reconciliation has only grown from build to build (SUCCEEDED
// with a duplicate audit due, then FAILED with a withdrawal audit due):
// each time the newer build put items in the index that the build before
// it reads as settled. Under a canary the old version keeps sweeping while
// the new one writes, and a rollback below a newer build is planned for.
// The older build's sweep must leave such an entry where it is: nothing
// but the index leads a reconciler to that work. Here a newer build keeps
// an ESCALATED operation due, as the withdrawal audit once kept a FAILED
// one due.
func TestANewerBuildsDueEntryIsNotErasedByThisBuildsSweep(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	op := f.toUnknown(t, f.storedOp(t, "op-newer-build-0001", orderID(5), time.Minute))
	esc, err := f.st.Transition(context.Background(), op, operation.Event{
		Type: operation.EventProbeBudgetExhausted, At: f.clock.Now(), Source: "reconciler", Actor: operator,
		Detail: "test: escalated",
	})
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, esc.State)

	// What a newer build writes on this item: a due time and its index entry.
	written, _ := f.st.DueShards()
	shard := "due"
	if i := store.DueShardOf(esc.Handle, written); i > 0 {
		shard = "due#" + strconv.Itoa(i)
	}
	due := f.clock.Now().Add(30 * time.Second).UTC().Format("2006-01-02T15:04:05.000000000Z")
	_, err = f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:        aws.String(f.table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + esc.Handle}},
		UpdateExpression: aws.String("SET due_at = :d, gsi1pk = :pk, gsi1sk = :d"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d": &types.AttributeValueMemberS{Value: due}, ":pk": &types.AttributeValueMemberS{Value: shard},
		},
	})
	require.NoError(t, err)

	f.clock.Advance(time.Minute)
	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	t.Logf("sweep: examined=%d errors=%d stopped=%s", rep.Examined, rep.Errors, rep.Stopped)

	item := rawItem(t, f, esc.Handle)
	_, inIndex := item["gsi1pk"]
	require.True(t, inIndex,
		"this build's sweep removed a due index entry it cannot tell from a newer build's scheduled work; "+
			"the item still has due_at=%v but nothing will ever read it again", item["due_at"])
}

// With many more never-sent operations than one sweep examines, moving
// each on by about a second still let them fill every sweep, and work of
// another family that fell due during the outage waited many sweeps. After
// the first never-sent search of a family in a sweep, the rest of that
// family's searches are moved on without an attempt each, bounded with the
// parked, and a never-sent search does not count as examined work.
func TestManyNeverSentProbesDoNotDelayOtherWorkBySweeps(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWhileRiskRefusesConnections(t)

	// Four invocations' worth of risk reviews left UNKNOWN by the outage.
	for i := range 12 {
		f.toUnknown(t, f.storedOp(t, fmt.Sprintf("op-hol2-risk-%02d", i), orderID(60+i), time.Minute))
	}
	f.clock.Advance(time.Second)
	// Sweeps run through the outage, once a minute.
	for range 4 {
		_, err := svc.Sweep(context.Background())
		require.NoError(t, err)
		f.clock.Advance(time.Minute)
	}
	// Now a ticket's dispatcher dies: its lease expires 30 s later.
	ticket := f.storedOpOf(t, release.ToolCreate, "op-hol2-ticket-01", 30*time.Second)
	f.clock.Advance(time.Minute) // due well before the next sweep

	reachedAt := 0
	for sweep := 1; sweep <= 3; sweep++ {
		rep, err := svc.Sweep(context.Background())
		require.NoError(t, err)
		t.Logf("sweep %d after the lease expired: examined=%d transitions=%d", sweep, rep.Examined, rep.Transitions)
		if reachedAt == 0 && f.get(t, ticket.Handle).State != operation.StatePending {
			reachedAt = sweep
		}
		f.clock.Advance(time.Minute)
	}
	require.Equal(t, 1, reachedAt,
		"the first sweep after the ticket's lease expired must reach it, whatever the never-sent probes of another provider")
}
