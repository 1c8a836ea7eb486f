// Command bench is `make bench-engine`: the latency of one single-item
// TransactWriteItems (a put-if-absent, as the store's insert) on a table
// holding 100, 1,000 and 10,000 items with its stream on, against stock
// moto (--stock-transactions) and the fast path, both started here in the
// same run, with the ratios side by side; on the same tables, the
// reconciler sweep's Query on the due index (ten due items among the rest)
// against stock moto's whole-table walk (--stock-queries) and the indexed
// Query (indexed_queries.py). A second table (wide.go) times
// the requests whose cost is per attribute against stock moto (--stock) and
// the launcher's patches, both running at once, samples alternating.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/localengine"
	"github.com/intentgate/intentgate/internal/store"
)

func main() {
	samples := flag.Int("samples", 7, "requests timed per size, request and engine (the median is printed)")
	part := flag.String("part", "all", "which table: all, transactions or wide")
	flag.Parse()
	var err error
	switch *part {
	case "all", "transactions":
		err = run(context.Background(), *samples, *part == "all")
	case "wide":
		err = runWide(context.Background(), *samples)
	default:
		err = fmt.Errorf("-part %q: want all, transactions or wide", *part)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

var sizes = []int{100, 1000, 10000}

func run(ctx context.Context, samples int, wide bool) error {
	if samples < 1 {
		return fmt.Errorf("samples %d: want at least 1", samples)
	}
	stock, stockQueries, err := measure(ctx, samples, "--stock-transactions", "--stock-queries")
	if err != nil {
		return fmt.Errorf("stock moto: %w", err)
	}
	fast, fastQueries, err := measure(ctx, samples)
	if err != nil {
		return fmt.Errorf("fast path: %w", err)
	}
	fmt.Printf("\nsingle-item TransactWriteItems, stream on, median of %d (ms)\n\n", samples)
	fmt.Printf("%8s  %10s  %10s  %12s\n", "items", "stock", "fast path", "stock/fast")
	for i, n := range sizes {
		fmt.Printf("%8d  %10.1f  %10.1f  %11.1fx\n", n, ms(stock[i]), ms(fast[i]), ratio(stock[i], fast[i]))
	}
	fmt.Printf("\nfast path at 10,000 / at 100 items: %.2fx (target <= 1.2x)\n", ratio(fast[2], fast[0]))
	fmt.Printf("stock / fast path at 1,000 items:   %.1fx (target >= 20x)\n", ratio(stock[1], fast[1]))
	fmt.Printf("\nQuery on the due index (10 due items, Limit 25), median of %d (ms)\n\n", samples)
	fmt.Printf("%8s  %10s  %10s  %12s\n", "items", "stock", "indexed", "stock/indexed")
	for i, n := range sizes {
		fmt.Printf("%8d  %10.1f  %10.1f  %11.1fx\n", n, ms(stockQueries[i]), ms(fastQueries[i]), ratio(stockQueries[i], fastQueries[i]))
	}
	fmt.Printf("\nindexed at 10,000 / at 100 items: %.2fx\n", ratio(fastQueries[2], fastQueries[0]))
	if !wide {
		return nil
	}
	return runWide(ctx, samples)
}

// measure starts one engine variant and times transactions and due-index
// Queries at each size, growing one table from size to size.
func measure(ctx context.Context, samples int, launcherArgs ...string) (transactions, queries []time.Duration, err error) {
	e, err := localengine.StartMoto(ctx, launcherArgs...)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = e.Stop() }()
	db, err := e.Client(ctx)
	if err != nil {
		return nil, nil, err
	}
	table := "bench"
	if _, err := db.CreateTable(ctx, store.CreateTableInput(table)); err != nil {
		return nil, nil, fmt.Errorf("create table: %w", err)
	}
	if err := fillDue(ctx, db, table); err != nil {
		return nil, nil, err
	}
	var out []time.Duration
	filled := 0
	for _, n := range sizes {
		if err := fill(ctx, db, table, filled, n); err != nil {
			return nil, nil, err
		}
		filled = n
		var took []time.Duration
		for s := range samples {
			pk := "bench#" + strconv.Itoa(n) + "-" + strconv.Itoa(s)
			started := time.Now()
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
				Put: &types.Put{TableName: aws.String(table), ConditionExpression: aws.String("attribute_not_exists(pk)"),
					Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "state": &types.AttributeValueMemberS{Value: "PENDING"}}},
			}}})
			took = append(took, time.Since(started))
			if err != nil {
				return nil, nil, fmt.Errorf("transaction at %d items: %w", n, err)
			}
			// keep the table at n items: the sample goes again
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}); err != nil {
				return nil, nil, fmt.Errorf("delete sample: %w", err)
			}
		}
		slices.Sort(took)
		out = append(out, took[len(took)/2])
		fmt.Fprintf(os.Stderr, "%s: %d items: median %.1f ms\n", variant(launcherArgs), n, ms(took[len(took)/2]))
		q, err := timeDueQuery(ctx, db, table, samples)
		if err != nil {
			return nil, nil, fmt.Errorf("query at %d items: %w", n, err)
		}
		queries = append(queries, q)
		fmt.Fprintf(os.Stderr, "%s: %d items: due query median %.1f ms\n", variant(launcherArgs), n, ms(q))
	}
	return out, queries, nil
}

// dueItems is how many items of the bench table are due: the sweep's answer.
const dueItems = 10

// fillDue writes the due items, as the store writes an operation awaiting
// the reconciler: in the due index under shard 0, due at a past time.
func fillDue(ctx context.Context, db *dynamodb.Client, table string) error {
	for i := range dueItems {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk":     &types.AttributeValueMemberS{Value: "op#due-" + strconv.Itoa(i)},
			"state":  &types.AttributeValueMemberS{Value: "UNKNOWN"},
			"gsi1pk": &types.AttributeValueMemberS{Value: "due"},
			"gsi1sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("2026-01-01T00:00:%02dZ", i)},
		}}); err != nil {
			return fmt.Errorf("due item %d: %w", i, err)
		}
	}
	return nil
}

// timeDueQuery is the median of samples sweep Queries (shard 0, due by now,
// Limit 25), each of which must find every due item.
func timeDueQuery(ctx context.Context, db *dynamodb.Client, table string, samples int) (time.Duration, error) {
	var took []time.Duration
	for range samples {
		started := time.Now()
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(table),
			IndexName:              aws.String(store.DueIndex),
			KeyConditionExpression: aws.String("gsi1pk = :k AND gsi1sk <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":k":   &types.AttributeValueMemberS{Value: "due"},
				":now": &types.AttributeValueMemberS{Value: "2026-12-01T00:00:00Z"},
			},
			Limit: aws.Int32(25),
		})
		took = append(took, time.Since(started))
		if err != nil {
			return 0, err
		}
		if len(out.Items) != dueItems {
			return 0, fmt.Errorf("found %d due items, want %d", len(out.Items), dueItems)
		}
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

// fill writes items from..to-1 with BatchWriteItem (each an insert stream record).
func fill(ctx context.Context, db *dynamodb.Client, table string, from, to int) error {
	for i := from; i < to; i += 25 {
		var reqs []types.WriteRequest
		for j := i; j < min(i+25, to); j++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: "op#fill-" + strconv.Itoa(j)},
				"state":   &types.AttributeValueMemberS{Value: "SUCCEEDED"},
				"version": &types.AttributeValueMemberN{Value: "3"},
				"journal": &types.AttributeValueMemberL{Value: []types.AttributeValue{
					&types.AttributeValueMemberS{Value: "created"}, &types.AttributeValueMemberS{Value: "create_succeeded"}}},
			}}})
		}
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}); err != nil {
			return fmt.Errorf("fill to %d items: %w", to, err)
		}
	}
	return nil
}

func variant(args []string) string {
	if len(args) > 0 {
		return "stock moto"
	}
	return "fast path"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
