package enginecontract

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// advance is the store's state transition: conditioned on the version it
// read, it bumps the version, sets the state, counts the attempt, appends to
// the journal (creating it on first use) and drops the lease.
func advance(table, expectVer, nextVer, state string, event types.AttributeValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 key("intent#1"),
		ConditionExpression: aws.String("#v = :expect"),
		UpdateExpression: aws.String("SET #v = :next, #s = :state, journal = list_append(if_not_exists(journal, :empty), :ev) " +
			"ADD attempts :one REMOVE lease"),
		ExpressionAttributeNames: map[string]string{"#v": "version", "#s": "state"},
		ExpressionAttributeValues: item{
			":expect": n(expectVer), ":next": n(nextVer), ":state": s(state),
			":empty": l(), ":ev": l(event), ":one": n("1"),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func TestVersionConditionedUpdateAppliesExactlyAndRefusesStale(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	putItem(t, c, table, item{"pk": s("intent#1"), "version": n("1"), "state": s("pending"), "lease": s("worker-a")})
	ev1 := m(item{"event": s("started"), "at": s("2026-01-01T00:00:01Z")})
	ev2 := m(item{"event": s("finished"), "at": s("2026-01-01T00:00:02Z")})

	out, err := c.UpdateItem(ctx, advance(table, "1", "2", "running", ev1))
	require.NoError(t, err, "first transition")
	afterFirst := item{
		"pk": s("intent#1"), "version": n("2"), "state": s("running"),
		"journal": l(ev1), "attempts": n("1"),
	}
	assert.Equal(t, afterFirst, out.Attributes, "journal created, attempts added, lease removed")

	out, err = c.UpdateItem(ctx, advance(table, "2", "3", "done", ev2))
	require.NoError(t, err, "second transition")
	afterSecond := item{
		"pk": s("intent#1"), "version": n("3"), "state": s("done"),
		"journal": l(ev1, ev2), "attempts": n("2"),
	}
	assert.Equal(t, afterSecond, out.Attributes, "journal appended, REMOVE of an absent attribute is harmless")

	_, err = c.UpdateItem(ctx, advance(table, "2", "3", "stale", ev1))
	var ccf *types.ConditionalCheckFailedException
	require.True(t, errors.As(err, &ccf), "want ConditionalCheckFailedException, got %v", err)
	assert.Equal(t, afterSecond, ccf.Item, "the refusal carries the current item")
	assert.Equal(t, afterSecond, getItem(t, c, table, "intent#1"), "stale update changed nothing")
}

func TestVersionConditionedUpdateOfMissingItemIsRefused(t *testing.T) {
	c, table := newTable(t)
	_, err := c.UpdateItem(t.Context(), advance(table, "1", "2", "running", m(item{"event": s("started")})))
	var ccf *types.ConditionalCheckFailedException
	require.True(t, errors.As(err, &ccf), "want ConditionalCheckFailedException, got %v", err)
	assert.Empty(t, ccf.Item)
	assert.Nil(t, getItem(t, c, table, "intent#1"), "a refused update creates no item")
}
