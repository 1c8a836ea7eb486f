package enginecontract

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamReader follows a table's (single) stream shard the way Lambda's
// event source mapping does: one iterator, then each NextShardIterator.
type streamReader struct {
	t        *testing.T
	streams  *dynamodbstreams.Client
	iterator *string
}

func newStreamReader(t *testing.T, c *dynamodb.Client, table string, position streamtypes.ShardIteratorType) *streamReader {
	t.Helper()
	ctx := t.Context()
	streams, err := engine.StreamsClient(ctx)
	require.NoError(t, err)
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	arn := desc.Table.LatestStreamArn
	require.NotNil(t, arn, "table %s has a stream", table)
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	require.NoError(t, err)
	require.NotEmpty(t, sd.StreamDescription.Shards)
	it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: sd.StreamDescription.Shards[0].ShardId, ShardIteratorType: position,
	})
	require.NoError(t, err)
	return &streamReader{t: t, streams: streams, iterator: it.ShardIterator}
}

// read returns the records available now and advances the iterator.
func (r *streamReader) read() []streamtypes.Record {
	r.t.Helper()
	out, err := r.streams.GetRecords(r.t.Context(), &dynamodbstreams.GetRecordsInput{ShardIterator: r.iterator})
	require.NoError(r.t, err)
	r.iterator = out.NextShardIterator
	return out.Records
}

// readUntil reads until a record for pk arrives and returns everything read.
func (r *streamReader) readUntil(pk string) []streamtypes.Record {
	r.t.Helper()
	var got []streamtypes.Record
	eventually(r.t, "stream record for "+pk, func() (bool, string) {
		got = append(got, r.read()...)
		for _, rec := range got {
			if keyOf(rec) == pk {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d records, none for %s", len(got), pk)
	})
	return got
}

func keyOf(rec streamtypes.Record) string {
	if v, ok := rec.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func keysOf(recs []streamtypes.Record) []string {
	keys := make([]string, len(recs))
	for i, rec := range recs {
		keys[i] = string(rec.EventName) + " " + keyOf(rec)
	}
	return keys
}

// A cancelled transaction writes no stream record, and an iterator handed
// out before it still sees the writes after it: the stream never goes stale.
func TestStreamStaysLiveAfterCancelledTransaction(t *testing.T) {
	c, table := newTable(t)
	ctx := t.Context()
	reader := newStreamReader(t, c, table, streamtypes.ShardIteratorTypeLatest)

	putItem(t, c, table, item{"pk": s("intent#a"), "state": s("PENDING")})
	assert.Equal(t, []string{"INSERT intent#a"}, keysOf(reader.readUntil("intent#a")))

	_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		txPutIfAbsent(table, item{"pk": s("bk#cancelled")}, ""),
		txPutIfAbsent(table, item{"pk": s("intent#a"), "state": s("UNKNOWN")}, ""),
	}})
	var tce *types.TransactionCanceledException
	require.True(t, errors.As(err, &tce), "want TransactionCanceledException, got %v", err)

	putItem(t, c, table, item{"pk": s("intent#b"), "state": s("PENDING")})
	assert.Equal(t, []string{"INSERT intent#b"}, keysOf(reader.readUntil("intent#b")),
		"the iterator from before the cancellation sees the next write, and nothing of the cancelled transaction")

	// A transaction that commits after the cancellation is seen too.
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		txPutIfAbsent(table, item{"pk": s("bk#c")}, ""),
		txPutIfAbsent(table, item{"pk": s("intent#c")}, ""),
	}})
	require.NoError(t, err)
	recs := reader.readUntil("intent#c")
	assert.ElementsMatch(t, []string{"INSERT bk#c", "INSERT intent#c"}, keysOf(recs))
}
