package enginecontract

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConditionalPutRefusesExistingKeyAndReturnsOldItem(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	first := item{"pk": s("intent#1"), "state": s("pending"), "version": n("1")}
	second := item{"pk": s("intent#1"), "state": s("running"), "version": n("7")}

	_, err := c.PutItem(ctx, putIfAbsent(table, first, ""))
	require.NoError(t, err, "first put of a new key")

	t.Run("refused_without_old_item_by_default", func(t *testing.T) {
		_, err := c.PutItem(ctx, putIfAbsent(table, second, ""))
		var ccf *types.ConditionalCheckFailedException
		require.True(t, errors.As(err, &ccf), "want ConditionalCheckFailedException, got %v", err)
		assert.Empty(t, ccf.Item)
	})

	t.Run("refused_with_old_item_under_ALL_OLD", func(t *testing.T) {
		_, err := c.PutItem(ctx, putIfAbsent(table, second, types.ReturnValuesOnConditionCheckFailureAllOld))
		var ccf *types.ConditionalCheckFailedException
		require.True(t, errors.As(err, &ccf), "want ConditionalCheckFailedException, got %v", err)
		assert.Equal(t, first, ccf.Item)
	})

	assert.Equal(t, first, getItem(t, c, table, "intent#1"), "refused puts changed nothing")
}

func TestConsistentGetItemReadsExactItemOrNothing(t *testing.T) {
	c, table := newTable(t)
	it := item{
		"pk":      s("intent#1"),
		"version": n("3"),
		"args":    m(item{"amount": n("12.5"), "currency": s("EUR")}),
		"journal": l(m(item{"event": s("created")})),
	}
	putItem(t, c, table, it)

	assert.Equal(t, it, getItem(t, c, table, "intent#1"))
	assert.Nil(t, getItem(t, c, table, "intent#missing"))
}
