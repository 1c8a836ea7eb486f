package enginecontract

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/store"
)

// engine is the one engine this test binary runs against (set in TestMain).
var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// gsi1 is the store's sparse index on gsi1pk/gsi1sk.
const gsi1 = store.DueIndex

// tableReadyTimeout covers real DynamoDB creating a table with a GSI and a
// stream; local engines are ready at once.
const tableReadyTimeout = 5 * time.Minute

// newTable creates a small table with exactly the store's schema
// (store.CreateTableInput: pk hash key, on-demand, NEW_AND_OLD_IMAGES
// stream, sparse GSI on gsi1pk/gsi1sk projecting ALL) through the raw
// client, and deletes it when the test ends.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	ctx := t.Context()
	c, err := engine.Client(ctx)
	require.NoError(t, err)
	name := enginetest.TableName(t)
	_, err = c.CreateTable(ctx, store.CreateTableInput(name))
	require.NoError(t, err, "create table %s", name)
	t.Cleanup(func() {
		_, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		assert.NoError(t, err, "delete table %s", name)
	})
	err = dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, tableReadyTimeout)
	require.NoError(t, err, "table %s active", name)
	return c, name
}

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func l(vs ...types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberL{Value: vs}
}
func m(fields item) types.AttributeValue { return &types.AttributeValueMemberM{Value: fields} }

func key(pk string) item { return item{"pk": s(pk)} }

// getItem reads an item with ConsistentRead; nil when absent.
func getItem(t *testing.T, c *dynamodb.Client, table, pk string) item {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            key(pk),
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err, "get %s", pk)
	if len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

func putItem(t *testing.T, c *dynamodb.Client, table string, it item) {
	t.Helper()
	_, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
	require.NoError(t, err)
}

// putIfAbsent is the store's create: a put conditioned on the key being new.
func putIfAbsent(table string, it item, rv types.ReturnValuesOnConditionCheckFailure) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           aws.String(table),
		Item:                                it,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: rv,
	}
}

// txPutIfAbsent is putIfAbsent as a transaction item.
func txPutIfAbsent(table string, it item, rv types.ReturnValuesOnConditionCheckFailure) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                           aws.String(table),
		Item:                                it,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: rv,
	}}
}

// reasonCodes lists the Code of each cancellation reason, in request order.
func reasonCodes(tce *types.TransactionCanceledException) []string {
	codes := make([]string, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		codes[i] = aws.ToString(r.Code)
	}
	return codes
}

// eventually polls cond until it reports true; real DynamoDB's GSIs are
// eventually consistent, local engines answer true at once.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(t, fmt.Sprintf("%s: not reached; last seen: %s", what, last))
		}
		select {
		case <-t.Context().Done():
			require.FailNow(t, what, t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
