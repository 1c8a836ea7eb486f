package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/intentgate/intentgate/internal/localengine"
	"github.com/intentgate/intentgate/internal/store"
)

// wideRequests are the requests whose cost grows with an item's attributes,
// timed on 30-attribute items like the operations table's.
var wideRequests = []string{"GetItem", "GetRecords (10)", "UpdateItem (20 SET)"}

const wideAttributes = 30

// runWide starts stock moto (--stock) and the patched launcher side by
// side, grows a table in each to every size and times wideRequests,
// alternating one sample on each engine so both see the same machine load.
func runWide(ctx context.Context, samples int) error {
	if samples < 1 {
		return fmt.Errorf("samples %d: want at least 1", samples)
	}
	stock, err := startWide(ctx, "--stock")
	if err != nil {
		return fmt.Errorf("stock moto: %w", err)
	}
	defer stock.stop()
	patched, err := startWide(ctx)
	if err != nil {
		return fmt.Errorf("patched: %w", err)
	}
	defer patched.stop()
	fmt.Printf("\nper-attribute work, %d-attribute items, stream on, median of %d (ms): stock moto (--stock) vs the launcher's patches, samples alternating\n\n",
		wideAttributes, samples)
	fmt.Printf("%8s  %-20s  %10s  %10s  %14s\n", "items", "request", "stock", "patched", "stock/patched")
	filled := 0
	for _, n := range sizes {
		var timers [2][]func(int) error
		for i, e := range []*wideEngine{stock, patched} {
			if err := fill(ctx, e.db, e.table, filled, n); err != nil {
				return err
			}
			if timers[i], err = e.prepare(ctx, n); err != nil {
				return err
			}
		}
		filled = n
		for j, name := range wideRequests {
			var took [2][]time.Duration
			for s := range samples {
				for i := range timers {
					started := time.Now()
					if err := timers[i][j](s); err != nil {
						return fmt.Errorf("%s at %d items: %w", name, n, err)
					}
					took[i] = append(took[i], time.Since(started))
				}
			}
			st, pa := median(took[0]), median(took[1])
			fmt.Printf("%8d  %-20s  %10.1f  %10.1f  %13.1fx\n", n, name, ms(st), ms(pa), ratio(st, pa))
		}
	}
	return nil
}

type wideEngine struct {
	engine    *localengine.Engine
	db        *dynamodb.Client
	streams   *dynamodbstreams.Client
	table     string
	streamARN string
}

func startWide(ctx context.Context, launcherArgs ...string) (*wideEngine, error) {
	e, err := localengine.StartMoto(ctx, launcherArgs...)
	if err != nil {
		return nil, err
	}
	w := &wideEngine{engine: e, table: "bench-wide"}
	if w.db, err = e.Client(ctx); err == nil {
		w.streams, err = e.StreamsClient(ctx)
	}
	if err != nil {
		w.stop()
		return nil, err
	}
	created, err := w.db.CreateTable(ctx, store.CreateTableInput(w.table))
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("create table: %w", err)
	}
	w.streamARN = aws.ToString(created.TableDescription.LatestStreamArn)
	return w, nil
}

func (w *wideEngine) stop() {
	if err := w.engine.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine: stop engine:", err)
	}
}

// prepare writes ten wide items twice (the second round: ten stream records
// with both images) and returns one timer per wideRequests entry.
func (w *wideEngine) prepare(ctx context.Context, n int) ([]func(int) error, error) {
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = "op#wide-" + strconv.Itoa(n) + "-" + strconv.Itoa(i)
		for round := range 2 {
			if _, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.table), Item: wideItem(keys[i], round)}); err != nil {
				return nil, fmt.Errorf("put wide item: %w", err)
			}
		}
	}
	lastTen, err := w.lastTenRecords(ctx)
	if err != nil {
		return nil, err
	}
	sets, names, values := setExpression(n)
	key := func(s int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: keys[s%len(keys)]}}
	}
	return []func(int) error{
		func(s int) error {
			_, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.table), ConsistentRead: aws.Bool(true), Key: key(s)})
			return err
		},
		func(int) error {
			it, err := lastTen(ctx)
			if err != nil {
				return err
			}
			out, err := w.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(10)})
			if err == nil && len(out.Records) != 10 {
				err = fmt.Errorf("GetRecords answered %d records, want 10", len(out.Records))
			}
			return err
		},
		func(s int) error {
			_, err := w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.table), Key: key(s),
				UpdateExpression: aws.String(sets), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		},
	}, nil
}

// lastTenRecords returns a function handing out a fresh iterator at the
// tenth record from the stream's current end.
func (w *wideEngine) lastTenRecords(ctx context.Context) (func(context.Context) (*string, error), error) {
	desc, err := w.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(w.streamARN)})
	if err != nil {
		return nil, fmt.Errorf("describe stream: %w", err)
	}
	shardID := desc.StreamDescription.Shards[0].ShardId
	first, err := w.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(w.streamARN),
		ShardId: shardID, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return nil, fmt.Errorf("shard iterator: %w", err)
	}
	var seqs []string
	for it := first.ShardIterator; ; {
		out, err := w.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1000)})
		if err != nil {
			return nil, fmt.Errorf("read stream: %w", err)
		}
		if len(out.Records) == 0 {
			break
		}
		for _, r := range out.Records {
			seqs = append(seqs, aws.ToString(r.Dynamodb.SequenceNumber))
		}
		it = out.NextShardIterator
	}
	if len(seqs) < 10 {
		return nil, fmt.Errorf("stream holds %d records, want at least 10", len(seqs))
	}
	from := seqs[len(seqs)-10]
	return func(ctx context.Context) (*string, error) {
		out, err := w.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(w.streamARN),
			ShardId: shardID, ShardIteratorType: streamtypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(from)})
		if err != nil {
			return nil, fmt.Errorf("shard iterator: %w", err)
		}
		return out.ShardIterator, nil
	}, nil
}

func wideItem(pk string, round int) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	for a := range wideAttributes - 1 {
		item["attr"+strconv.Itoa(a)] = &types.AttributeValueMemberS{Value: fmt.Sprintf("value %d of round %d, long enough to look real", a, round)}
	}
	return item
}

// setExpression is a 20-action SET over placeholders, like the store's state writes.
func setExpression(n int) (string, map[string]string, map[string]types.AttributeValue) {
	expr := "SET "
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	for i := range 20 {
		if i > 0 {
			expr += ", "
		}
		expr += fmt.Sprintf("#a%d = :v%d", i, i)
		names["#a"+strconv.Itoa(i)] = "attr" + strconv.Itoa(i)
		values[":v"+strconv.Itoa(i)] = &types.AttributeValueMemberS{Value: "updated at " + strconv.Itoa(n)}
	}
	return expr, names, values
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
