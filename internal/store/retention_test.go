package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// A FAILED operation is kept for INTENTGATE_RETENTION, and so is what its
// keys are bound to: within it, a replay gets the FAILED answer; once
// DynamoDB's TTL has removed the item, a key bound to it answers
// NOT_FOUND (a new key is needed) and the operation's own operation_id,
// like an expired Idempotency-Key, names a new operation. (docs/design.md,
// "Retention".)
func TestAFailedOperationsKeysAreRememberedForItsRetention(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const fact = "risk_review|O20260728001|standard|g1"
	a := newOp(t, "client-a", "expiry-key-0001", fact, "r")
	f.insert(t, a)
	b := newOp(t, "client-a", "expiry-key-0002", fact, "r")
	res, err := f.st.InsertIfAbsent(ctx, b)
	require.NoError(t, err)
	require.Equal(t, store.BusinessKeyHeld, res.Kind, "b is bound to a")

	failed, err := f.st.Transition(ctx, a, operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, operation.StateFailed, failed.State)
	replay, err := f.st.InsertIfAbsent(ctx, newOp(t, "client-a", "expiry-key-0001", fact, "r"))
	require.NoError(t, err)
	assert.Equal(t, store.Replay, replay.Kind, "within retention the replay is answered FAILED")
	assert.Equal(t, operation.StateFailed, replay.Operation.State)

	// Retention passes: DynamoDB's TTL deletes the item.
	_, err = f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + a.Handle}}})
	require.NoError(t, err)

	_, err = f.st.InsertIfAbsent(ctx, b)
	assert.ErrorIs(t, err, store.ErrHolderMissing, "the bound key asks for a new key")
	again, err := f.st.InsertIfAbsent(ctx, newOp(t, "client-a", "expiry-key-0001", fact, "r"))
	require.NoError(t, err)
	assert.Equal(t, store.Inserted, again.Kind, "the expired operation_id names a new operation")
}
