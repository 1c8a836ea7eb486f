package enginecontract

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/localengine"
)

const (
	codeConditionalCheckFailed = "ConditionalCheckFailed"
	codeNone                   = "None"
)

func TestTransactionCancelledWithPerItemReasons(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	allOld := types.ReturnValuesOnConditionCheckFailureAllOld
	a := item{"pk": s("intent#a"), "state": s("pending")}
	b := item{"pk": s("bk#b"), "owner": s("intent#b")}
	putItem(t, c, table, a)

	t.Run("one_failing_reports_ConditionalCheckFailed_then_None", func(t *testing.T) {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			txPutIfAbsent(table, item{"pk": s("intent#a"), "state": s("other")}, allOld),
			txPutIfAbsent(table, b, allOld),
		}})
		var tce *types.TransactionCanceledException
		require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
		assert.Equal(t, []string{codeConditionalCheckFailed, codeNone}, reasonCodes(tce))
		assert.Equal(t, a, tce.CancellationReasons[0].Item, "old item of the failing put")
		assert.Empty(t, tce.CancellationReasons[1].Item)
		assert.Equal(t, a, getItem(t, c, table, "intent#a"))
		assert.Nil(t, getItem(t, c, table, "bk#b"), "cancelled transaction wrote nothing")
	})

	t.Run("both_failing_report_ConditionalCheckFailed_with_old_items", func(t *testing.T) {
		putItem(t, c, table, b)
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			txPutIfAbsent(table, item{"pk": s("intent#a"), "state": s("other")}, allOld),
			txPutIfAbsent(table, item{"pk": s("bk#b"), "owner": s("intent#other")}, allOld),
		}})
		var tce *types.TransactionCanceledException
		require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
		assert.Equal(t, []string{codeConditionalCheckFailed, codeConditionalCheckFailed}, reasonCodes(tce))
		assert.Equal(t, a, tce.CancellationReasons[0].Item)
		assert.Equal(t, b, tce.CancellationReasons[1].Item)
	})

	t.Run("no_old_item_without_ALL_OLD", func(t *testing.T) {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			txPutIfAbsent(table, item{"pk": s("intent#a"), "state": s("other")}, ""),
			txPutIfAbsent(table, item{"pk": s("intent#c")}, ""),
		}})
		var tce *types.TransactionCanceledException
		require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
		assert.Equal(t, []string{codeConditionalCheckFailed, codeNone}, reasonCodes(tce))
		assert.Empty(t, tce.CancellationReasons[0].Item)
		assert.Nil(t, getItem(t, c, table, "intent#c"))
	})
}

// DynamoDB documents that a TransactWriteItems call repeated with the same
// ClientRequestToken (within 10 minutes) succeeds without applying again.
// moto ignores the token: the repeat is evaluated afresh and its conditions
// fail. The store must therefore not rely on the token for idempotency; its
// conditions alone have to make a repeated write harmless. Either way the
// repeat must not apply twice.
func TestTransactionRepeatedWithSameClientRequestToken(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	tok := make([]byte, 16)
	_, err := rand.Read(tok)
	require.NoError(t, err)
	in := &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String(hex.EncodeToString(tok)),
		TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName:                 aws.String(table),
				Key:                       key("counter#1"),
				UpdateExpression:          aws.String("ADD applied :one"),
				ExpressionAttributeValues: item{":one": n("1")},
			}},
			txPutIfAbsent(table, item{"pk": s("intent#1")}, ""),
		},
	}
	_, err = c.TransactWriteItems(ctx, in)
	require.NoError(t, err, "first transaction")

	_, err = c.TransactWriteItems(ctx, in)
	switch engine.Kind() {
	case localengine.KindMoto:
		t.Run("moto_difference_ignores_ClientRequestToken", func(t *testing.T) {
			var tce *types.TransactionCanceledException
			require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
			assert.Equal(t, []string{codeNone, codeConditionalCheckFailed}, reasonCodes(tce))
		})
	case localengine.KindDynamoDB:
		t.Run("dynamodb_repeat_succeeds_idempotently", func(t *testing.T) {
			assert.NoError(t, err)
		})
	default:
		t.Run("repeat_is_idempotent_or_cancelled", func(t *testing.T) {
			if err == nil {
				t.Logf("%s engine honours ClientRequestToken like DynamoDB", engine.Kind())
				return
			}
			var tce *types.TransactionCanceledException
			require.True(t, errors.As(err, &tce), "want success or TransactionCanceledException, got %v", err)
			assert.Equal(t, []string{codeNone, codeConditionalCheckFailed}, reasonCodes(tce))
			t.Logf("%s engine ignores ClientRequestToken like moto", engine.Kind())
		})
	}
	assert.Equal(t, item{"pk": s("counter#1"), "applied": n("1")}, getItem(t, c, table, "counter#1"),
		"the repeat applied no second effect")
}

// The store moves an intent forward and releases its business-key item in
// one transaction: a version-conditioned Update plus a conditioned Delete.
func TestTransactionUpdatesVersionAndDeletesOwnedKey(t *testing.T) {
	tests := []struct {
		name        string
		expectVer   string
		keyOwner    string
		wantCodes   []string // nil: the transaction succeeds
		wantIntent  item
		wantKeyItem item
	}{
		{
			name:        "current_version_and_owner_commit_both",
			expectVer:   "1",
			keyOwner:    "intent#1",
			wantIntent:  item{"pk": s("intent#1"), "version": n("2"), "state": s("done")},
			wantKeyItem: nil,
		},
		{
			name:        "stale_version_cancels_both",
			expectVer:   "0",
			keyOwner:    "intent#1",
			wantCodes:   []string{codeConditionalCheckFailed, codeNone},
			wantIntent:  item{"pk": s("intent#1"), "version": n("1"), "state": s("running"), "bk": s("bk#order-42")},
			wantKeyItem: item{"pk": s("bk#order-42"), "owner": s("intent#1")},
		},
		{
			name:        "key_owned_by_another_intent_cancels_both",
			expectVer:   "1",
			keyOwner:    "intent#other",
			wantCodes:   []string{codeNone, codeConditionalCheckFailed},
			wantIntent:  item{"pk": s("intent#1"), "version": n("1"), "state": s("running"), "bk": s("bk#order-42")},
			wantKeyItem: item{"pk": s("bk#order-42"), "owner": s("intent#other")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, table := newTable(t)
			putItem(t, c, table, item{"pk": s("intent#1"), "version": n("1"), "state": s("running"), "bk": s("bk#order-42")})
			putItem(t, c, table, item{"pk": s("bk#order-42"), "owner": s(tt.keyOwner)})

			_, err := c.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{
					TableName:                aws.String(table),
					Key:                      key("intent#1"),
					ConditionExpression:      aws.String("#v = :expect"),
					UpdateExpression:         aws.String("SET #v = :next, #s = :state REMOVE bk"),
					ExpressionAttributeNames: map[string]string{"#v": "version", "#s": "state"},
					ExpressionAttributeValues: item{
						":expect": n(tt.expectVer), ":next": n("2"), ":state": s("done"),
					},
				}},
				{Delete: &types.Delete{
					TableName:                 aws.String(table),
					Key:                       key("bk#order-42"),
					ConditionExpression:       aws.String("#o = :intent"),
					ExpressionAttributeNames:  map[string]string{"#o": "owner"},
					ExpressionAttributeValues: item{":intent": s("intent#1")},
				}},
			}})
			if tt.wantCodes == nil {
				require.NoError(t, err)
			} else {
				var tce *types.TransactionCanceledException
				require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
				assert.Equal(t, tt.wantCodes, reasonCodes(tce))
			}
			assert.Equal(t, tt.wantIntent, getItem(t, c, table, "intent#1"))
			assert.Equal(t, tt.wantKeyItem, getItem(t, c, table, "bk#order-42"))
		})
	}
}

// DynamoDB answers a transaction naming a table that does not exist with
// ResourceNotFoundException, and applies nothing. moto does so for Put and
// Update actions (it validates them up front); for a Delete or a
// ConditionCheck on a missing table it cancels the transaction with that
// action's reason coded ResourceNotFoundException. Either way nothing is
// applied, which is all the store relies on.
func TestTransactionOnAMissingTable(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	missing := table + "-missing"
	put := txPutIfAbsent(table, item{"pk": s("intent#a")}, "")

	_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		put, txPutIfAbsent(missing, item{"pk": s("intent#b")}, ""),
	}})
	var notFound *types.ResourceNotFoundException
	assert.True(t, errors.As(err, &notFound), "put into a missing table: want ResourceNotFoundException, got %v", err)
	assert.Nil(t, getItem(t, c, table, "intent#a"), "nothing applied")

	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		put, {ConditionCheck: &types.ConditionCheck{TableName: aws.String(missing), Key: key("intent#b"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	if engine.Kind() == localengine.KindMoto {
		t.Run("moto_difference_condition_check_on_a_missing_table_cancels", func(t *testing.T) {
			var tce *types.TransactionCanceledException
			require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)
			assert.Equal(t, []string{codeNone, "ResourceNotFoundException"}, reasonCodes(tce))
		})
	} else {
		t.Run("condition_check_on_a_missing_table_is_ResourceNotFound", func(t *testing.T) {
			assert.True(t, errors.As(err, &notFound), "want ResourceNotFoundException, got %v", err)
		})
	}
	assert.Nil(t, getItem(t, c, table, "intent#a"), "nothing applied")
}
