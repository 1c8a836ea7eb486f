package enginecontract

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DynamoDB validates a request before it applies anything: a request whose
// expressions leave an ExpressionAttributeValues entry unused, name a
// placeholder nobody defined, or write an index key attribute of another
// type than the table defines is refused with ValidationException (HTTP
// 400) and changes nothing. An engine that accepts such a request lets a
// store bug pass every local test and fail every request in production;
// one that answers 500 makes the SDK retry a request that can never work.

// requireValidationError asserts err is DynamoDB's ValidationException.
func requireValidationError(t *testing.T, err error) {
	t.Helper()
	var api smithy.APIError
	require.True(t, errors.As(err, &api), "want ValidationException, got %v", err)
	assert.Equal(t, "ValidationException", api.ErrorCode(), "error: %v", err)
}

func TestAnUnusedExpressionAttributeValueIsRefused(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	putItem(t, c, table, item{"pk": s("held"), "state": s("PENDING")})
	unused := func(used item) item {
		used[":unused"] = s("x")
		return used
	}
	notExists := aws.String("attribute_not_exists(pk)")
	calls := map[string]func() error{
		"put_item": func() error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item{"pk": s("new#1")},
				ConditionExpression: notExists, ExpressionAttributeValues: unused(item{})})
			return err
		},
		"delete_item": func() error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("held"),
				ConditionExpression: aws.String("#s = :s"), ExpressionAttributeNames: map[string]string{"#s": "state"},
				ExpressionAttributeValues: unused(item{":s": s("PENDING")})})
			return err
		},
		"transaction_put": func() error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": s("new#2")},
					ConditionExpression: notExists, ExpressionAttributeValues: unused(item{})}}}})
			return err
		},
		"transaction_update": func() error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String(table), Key: key("held"), UpdateExpression: aws.String("SET v = :v"),
					ExpressionAttributeValues: unused(item{":v": n("1")})}}}})
			return err
		},
		"transaction_delete": func() error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Delete: &types.Delete{TableName: aws.String(table), Key: key("held"),
					ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: unused(item{})}}}})
			return err
		},
		"transaction_condition_check": func() error {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("held"),
					ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: unused(item{})}},
				{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": s("new#3")}}}}})
			return err
		},
		"query_table": func() error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
				ExpressionAttributeValues: unused(item{":p": s("held")})})
			return err
		},
		"query_due_index": func() error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(gsi1),
				KeyConditionExpression:    aws.String("gsi1pk = :p AND gsi1sk <= :now"),
				ExpressionAttributeValues: unused(item{":p": s("due#0"), ":now": s("2026")})})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { requireValidationError(t, call()) })
	}
	assert.Equal(t, item{"pk": s("held"), "state": s("PENDING")}, getItem(t, c, table, "held"), "refused requests changed nothing")
	for _, pk := range []string{"new#1", "new#2", "new#3"} {
		assert.Nil(t, getItem(t, c, table, pk), "refused request wrote %s", pk)
	}
}

func TestAnUndefinedPlaceholderIsAValidationErrorNotAServerError(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	t.Run("value_in_put_item", func(t *testing.T) {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item{"pk": s("u#1")},
			ConditionExpression: aws.String("v = :missing")})
		requireValidationError(t, err)
	})
	t.Run("value_in_transaction", func(t *testing.T) {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": s("u#2")},
				ConditionExpression: aws.String("v = :missing OR v = :a"), ExpressionAttributeValues: item{":a": s("x")}}}}})
		requireValidationError(t, err)
	})
	t.Run("name_in_transaction", func(t *testing.T) {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": s("u#3")},
				ConditionExpression: aws.String("attribute_not_exists(#missing)")}}}})
		requireValidationError(t, err)
	})
	for _, pk := range []string{"u#1", "u#2", "u#3"} {
		assert.Nil(t, getItem(t, c, table, pk), "refused request wrote %s", pk)
	}
}

func TestAnIndexKeyAttributeOfTheWrongTypeIsRefused(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	t.Run("put_item", func(t *testing.T) {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: item{"pk": s("w#1"), "gsi1pk": n("3"), "gsi1sk": s("2026")}})
		requireValidationError(t, err)
	})
	t.Run("transaction_put", func(t *testing.T) {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item{"pk": s("w#2"), "gsi1pk": s("due#0"), "gsi1sk": n("2026")}}}}})
		requireValidationError(t, err)
	})
	t.Run("update_item", func(t *testing.T) { // moto already refuses this one
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("w#3"),
			UpdateExpression: aws.String("SET gsi1pk = :v"), ExpressionAttributeValues: item{":v": n("3")}})
		requireValidationError(t, err)
	})
	for _, pk := range []string{"w#1", "w#2", "w#3"} {
		assert.Nil(t, getItem(t, c, table, pk), "refused request wrote %s", pk)
	}
}
