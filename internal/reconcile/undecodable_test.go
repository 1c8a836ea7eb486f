package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
)

// One due-index item the store cannot decode is counted as that
// operation's error and logged, like any failure on one operation; the
// sweep goes on, so what is due after it, in any shard, is still
// reconciled. Either a state this build does not know (a newer build's,
// before a rollback) or an attribute of the wrong type (a hand edit in the
// console), which fails before the item is an operation at all: the reader
// still knows its index keys and moves on.
func TestAnUndecodableDueItemIsCountedAndTheSweepGoesOn(t *testing.T) {
	for name, edit := range map[string][2]string{
		"a state this build does not know": {"state", "SUPERSEDED"},
		"an attribute of the wrong type":   {"version", "1"},
		// Acted on, it would probe and write through another operation's
		// item: the stream entry point refuses the same mismatch.
		"a handle that is not its key's": {"handle", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			svc := f.service(t)
			bad := f.storedOp(t, "op-poison-0001", orderID(1), time.Minute)
			f.corrupt(t, bad.Handle, edit[0], edit[1])
			f.clock.Advance(10 * time.Second)
			good := f.storedOp(t, "op-good-0001", orderID(2), time.Minute)
			f.clock.Advance(2 * time.Minute)
			for sweep := range 3 {
				f.clock.Advance(time.Minute)
				rep, err := svc.Sweep(context.Background())
				require.NoError(t, err, "sweep %d", sweep)
				assert.Equal(t, 1, rep.Errors, "sweep %d: the undecodable item is the one error", sweep)
			}
			assert.NotEqual(t, operation.StatePending, f.get(t, good.Handle).State, "the good operation's lost lease was handled")
		})
	}
}

// Undecodable items are bounded per sweep like parked ones: a rollback
// below a build that wrote many of a state this build does not know must
// not spend every sweep's time on them, oldest first, before any work.
func TestUndecodableItemsAreBoundedPerSweep(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.MaxParkPerInvocation = 3 })
	for i := range 5 {
		bad := f.storedOp(t, fmt.Sprintf("op-poison-%04d", i), orderID(i), time.Minute)
		f.corrupt(t, bad.Handle, "state", "SUPERSEDED")
	}
	f.clock.Advance(2 * time.Minute)
	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Errors)
	assert.Equal(t, reconcile.StoppedMaxPark, rep.Stopped)
}

// corrupt sets an attribute of an operation's item to a string, as a hand
// edit in the console would.
func (f fixture) corrupt(t *testing.T, handle, attr, value string) {
	t.Helper()
	corruptItem(t, f.table, handle, attr, value)
}

// corruptItem sets an attribute of the item of the operation handle in
// table to a string.
func corruptItem(t *testing.T, table, handle, attr, value string) {
	t.Helper()
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	_, err = db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + handle}},
		UpdateExpression:          aws.String("SET #a = :v"),
		ExpressionAttributeNames:  map[string]string{"#a": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: value}},
	})
	require.NoError(t, err)
}
