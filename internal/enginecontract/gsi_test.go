package enginecontract

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	duePartition = "due"
	dueNow       = "2026-01-01T00:00:05Z"
)

// dueQuery is the reconciler's sweep: items in the due partition whose due
// time has come, oldest first.
func dueQuery(table string, limit int32, start item) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(table),
		IndexName:              aws.String(gsi1),
		KeyConditionExpression: aws.String("gsi1pk = :p AND gsi1sk <= :now"),
		ExpressionAttributeValues: item{
			":p": s(duePartition), ":now": s(dueNow),
		},
		ExclusiveStartKey: start,
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	return in
}

// setDue makes an existing item enter the sparse index.
func setDue(t *testing.T, c *dynamodb.Client, table, pk, partition, at string) {
	t.Helper()
	_, err := c.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key(pk),
		UpdateExpression:          aws.String("SET gsi1pk = :p, gsi1sk = :at"),
		ExpressionAttributeValues: item{":p": s(partition), ":at": s(at)},
	})
	require.NoError(t, err)
}

func pks(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if v, ok := it["pk"].(*types.AttributeValueMemberS); ok {
			out[i] = v.Value
		}
	}
	return out
}

func TestSparseIndexEntryByUpdateExitByRemoveAndPagedQuery(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()

	// Five due items, entered in shuffled order through UpdateItem SET.
	for _, i := range []int{3, 1, 5, 2, 4} {
		pk := fmt.Sprintf("intent#%d", i)
		putItem(t, c, table, item{"pk": s(pk), "state": s("pending")})
		setDue(t, c, table, pk, duePartition, fmt.Sprintf("2026-01-01T00:00:0%dZ", i))
	}
	// Not due yet, another partition, never indexed, and one that leaves.
	for _, pk := range []string{"intent#future", "intent#elsewhere", "intent#plain", "intent#left"} {
		putItem(t, c, table, item{"pk": s(pk), "state": s("pending")})
	}
	setDue(t, c, table, "intent#future", duePartition, "2026-01-01T00:00:09Z")
	setDue(t, c, table, "intent#elsewhere", "other", "2026-01-01T00:00:01Z")
	setDue(t, c, table, "intent#left", duePartition, "2026-01-01T00:00:00Z")
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(table),
		Key:              key("intent#left"),
		UpdateExpression: aws.String("REMOVE gsi1pk, gsi1sk"),
	})
	require.NoError(t, err)

	want := []string{"intent#1", "intent#2", "intent#3", "intent#4", "intent#5"}
	eventually(t, "index shows exactly the due items", func() (bool, string) {
		out, err := c.Query(ctx, dueQuery(table, 0, nil))
		require.NoError(t, err)
		got := pks(out.Items)
		return slices.Equal(want, got), fmt.Sprint(got)
	})

	var pages [][]string
	var first []item
	var start item
	for page := 0; ; page++ {
		require.Less(t, page, 10, "paging does not end")
		out, err := c.Query(ctx, dueQuery(table, 2, start))
		require.NoError(t, err)
		if page == 0 {
			first = out.Items
		}
		pages = append(pages, pks(out.Items))
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	assert.Equal(t, [][]string{{"intent#1", "intent#2"}, {"intent#3", "intent#4"}, {"intent#5"}}, pages)
	require.NotEmpty(t, first)
	assert.Equal(t, item{
		"pk": s("intent#1"), "state": s("pending"),
		"gsi1pk": s(duePartition), "gsi1sk": s("2026-01-01T00:00:01Z"),
	}, first[0], "projection ALL returns the whole item")
}
