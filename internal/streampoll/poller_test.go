package streampoll_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/localengine"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/streampoll"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// fixture is a table with the store's schema (stream on) and a poller
// delivering to a recording handler.
type fixture struct {
	t       *testing.T
	db      *dynamodb.Client
	table   string
	arn     string
	batches chan events.DynamoDBEvent
	respond func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	mu      sync.Mutex
	calls   int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	db, err := engine.Client(ctx)
	require.NoError(t, err)
	table := enginetest.TableName(t)
	_, err = db.CreateTable(ctx, store.CreateTableInput(table))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	return &fixture{t: t, db: db, table: table, arn: aws.ToString(desc.Table.LatestStreamArn),
		batches: make(chan events.DynamoDBEvent, 100)}
}

func (f *fixture) handle(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.mu.Unlock()
	f.batches <- ev
	if f.respond != nil {
		return f.respond(call, ev)
	}
	return events.DynamoDBEventResponse{}, nil
}

// start runs a poller until the test ends.
func (f *fixture) start(tr streampoll.Trigger) {
	f.t.Helper()
	streams, err := engine.StreamsClient(f.t.Context())
	require.NoError(f.t, err)
	p, err := streampoll.New(streams, streampoll.Config{StreamARN: f.arn, Trigger: tr, RetryWait: time.Millisecond}, f.handle)
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		assert.NoError(f.t, <-done, "Run ends cleanly when its context does")
	})
}

// next waits for the next handler invocation.
func (f *fixture) next() events.DynamoDBEvent {
	f.t.Helper()
	select {
	case ev := <-f.batches:
		return ev
	case <-time.After(30 * time.Second):
		f.t.Fatal("no batch delivered")
		return events.DynamoDBEvent{}
	}
}

func (f *fixture) put(pk string, attrs map[string]string) {
	f.t.Helper()
	it := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	for k, v := range attrs {
		it[k] = &types.AttributeValueMemberS{Value: v}
	}
	_, err := f.db.PutItem(f.t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: it})
	require.NoError(f.t, err)
}

func (f *fixture) setState(pk, state string) {
	f.t.Helper()
	_, err := f.db.UpdateItem(f.t.Context(), &dynamodb.UpdateItemInput{
		TableName: aws.String(f.table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
		UpdateExpression:          aws.String("SET #s = :s ADD version :one"),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: state}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	require.NoError(f.t, err)
}

func keys(ev events.DynamoDBEvent) []string {
	var out []string
	for _, r := range ev.Records {
		out = append(out, r.Change.Keys["pk"].String()+" "+r.Change.NewImage["state"].String())
	}
	return out
}

func repoTemplate(t *testing.T) streampoll.Trigger {
	t.Helper()
	root, err := localengine.RepoRoot()
	require.NoError(t, err)
	tr, err := streampoll.TriggerFromTemplate(filepath.Join(root, "template.yaml"), "ReconcilerFunction")
	require.NoError(t, err)
	return tr
}

// With the template's own FilterCriteria, only records of an operation
// entering UNKNOWN or RETRYABLE from another state reach the handler, in
// the shape Lambda delivers.
func TestTemplateFilterDeliversOnlyEntriesIntoUnknownOrRetryable(t *testing.T) {
	f := newFixture(t)
	tr := repoTemplate(t)
	tr.MaxBatchingWindow = 0 // one record per batch keeps the expectation exact
	f.start(tr)

	// The poller starts at LATEST: enter UNKNOWN with a marker until a
	// batch shows the poller is reading.
	for marked := false; !marked; {
		f.put("op#marker", map[string]string{"state": "PENDING"})
		f.setState("op#marker", "UNKNOWN")
		select {
		case ev := <-f.batches:
			require.Equal(t, []string{"op#marker UNKNOWN"}, keys(ev))
			marked = true
		case <-time.After(2 * time.Second):
		}
	}

	f.put("op#a", map[string]string{"state": "PENDING"}) // INSERT PENDING: no
	f.put("bk#a", map[string]string{"owner": "op#a"})    // business-key item: no
	f.setState("op#a", "UNKNOWN")                        // PENDING -> UNKNOWN: yes
	f.setState("op#a", "UNKNOWN")                        // UNKNOWN -> UNKNOWN (backoff): no
	f.setState("op#a", "RETRYABLE")                      // UNKNOWN -> RETRYABLE: yes
	f.setState("op#a", "PENDING")                        // claim: no
	f.setState("op#a", "SUCCEEDED")                      // no
	_, err := f.db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(f.table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "bk#a"}}}) // REMOVE: no
	require.NoError(t, err)
	f.put("op#last", map[string]string{"state": "PENDING"})
	f.setState("op#last", "UNKNOWN")

	var got []string
	for len(got) == 0 || got[len(got)-1] != "op#last UNKNOWN" {
		ev := f.next()
		for _, r := range ev.Records {
			assert.Equal(t, "aws:dynamodb", r.EventSource)
			assert.Equal(t, f.arn, r.EventSourceArn)
			assert.NotEmpty(t, r.Change.SequenceNumber)
			assert.Equal(t, "MODIFY", r.EventName, "entries are modifications of an existing operation")
			assert.NotEqual(t, r.Change.OldImage["state"].String(), r.Change.NewImage["state"].String())
		}
		for _, k := range keys(ev) {
			if k != "op#marker UNKNOWN" { // a late marker from the start-up loop
				got = append(got, k)
			}
		}
	}
	assert.Equal(t, []string{"op#a UNKNOWN", "op#a RETRYABLE", "op#last UNKNOWN"}, got)
}

func unfiltered() streampoll.Trigger {
	return streampoll.Trigger{BatchSize: 10, StartingPosition: "TRIM_HORIZON", MaxRetryAttempts: 2, FunctionTimeout: 10 * time.Second}
}

// Records written before the poller started are read from TRIM_HORIZON in
// batches of at most BatchSize, in order.
func TestBatchesHoldAtMostBatchSizeRecordsInOrder(t *testing.T) {
	f := newFixture(t)
	for i := range 25 {
		f.put("op#"+strconv.Itoa(100+i), map[string]string{"state": "PENDING"})
	}
	f.start(unfiltered())
	var seen []string
	for len(seen) < 25 {
		ev := f.next()
		assert.LessOrEqual(t, len(ev.Records), 10)
		seen = append(seen, keys(ev)...)
	}
	for i, k := range seen {
		assert.Equal(t, "op#"+strconv.Itoa(100+i)+" PENDING", k)
	}
}

// A batchItemFailures answer makes the next invocation start at the lowest
// failed record; the records before it are not delivered again.
func TestFailedRecordsAreRetriedFromTheLowestFailure(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.put("op#"+strconv.Itoa(i), map[string]string{"state": "PENDING"})
	}
	f.respond = func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: ev.Records[4].Change.SequenceNumber},
				{ItemIdentifier: ev.Records[2].Change.SequenceNumber},
			}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	tr := unfiltered()
	tr.ReportBatchItemFailures = true
	tr.MaxBatchingWindow = time.Second // all five in the first batch
	f.start(tr)
	assert.Equal(t, []string{"op#0 PENDING", "op#1 PENDING", "op#2 PENDING", "op#3 PENDING", "op#4 PENDING"}, keys(f.next()))
	assert.Equal(t, []string{"op#2 PENDING", "op#3 PENDING", "op#4 PENDING"}, keys(f.next()))
	f.put("op#5", map[string]string{"state": "PENDING"})
	assert.Equal(t, []string{"op#5 PENDING"}, keys(f.next()), "then polling goes on after the batch")
}

// Without ReportBatchItemFailures in FunctionResponseTypes Lambda does not
// read batchItemFailures: an answer naming failed records is a success, and
// the batch is not delivered again.
func TestBatchItemFailuresAreIgnoredWithoutReportBatchItemFailures(t *testing.T) {
	f := newFixture(t)
	f.put("op#1", map[string]string{"state": "PENDING"})
	f.put("op#2", map[string]string{"state": "PENDING"})
	f.respond = func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: ev.Records[1].Change.SequenceNumber},
			}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	tr := unfiltered()
	tr.MaxBatchingWindow = time.Second
	require.False(t, tr.ReportBatchItemFailures)
	f.start(tr)
	assert.Equal(t, []string{"op#1 PENDING", "op#2 PENDING"}, keys(f.next()))
	f.put("op#3", map[string]string{"state": "PENDING"})
	assert.Equal(t, []string{"op#3 PENDING"}, keys(f.next()), "the reported failure was not retried")
}

// A handler error retries the whole batch, at most MaxRetryAttempts times;
// then the poller gives the batch up and goes on with the next records.
func TestAFailingBatchIsRetriedThenGivenUp(t *testing.T) {
	f := newFixture(t)
	f.put("op#x", map[string]string{"state": "PENDING"})
	f.respond = func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if keys(ev)[0] == "op#x PENDING" {
			return events.DynamoDBEventResponse{}, assert.AnError
		}
		return events.DynamoDBEventResponse{}, nil
	}
	tr := unfiltered()
	tr.MaxRetryAttempts = 2
	f.start(tr)
	for range 3 { // the first attempt and two retries
		assert.Equal(t, []string{"op#x PENDING"}, keys(f.next()))
	}
	f.put("op#y", map[string]string{"state": "PENDING"})
	assert.Equal(t, []string{"op#y PENDING"}, keys(f.next()))
}

// An invocation that outlives the function timeout is a function error, as
// in Lambda: its late answer is discarded and the batch retried whole.
func TestAnInvocationPastTheFunctionTimeoutIsRetried(t *testing.T) {
	f := newFixture(t)
	f.put("op#slow", map[string]string{"state": "PENDING"})
	f.respond = func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			time.Sleep(300 * time.Millisecond) // past the 100 ms timeout, ignoring its context
		}
		return events.DynamoDBEventResponse{}, nil
	}
	tr := unfiltered()
	tr.FunctionTimeout = 100 * time.Millisecond
	tr.MaxRetryAttempts = 2
	f.start(tr)
	assert.Equal(t, []string{"op#slow PENDING"}, keys(f.next()))
	select {
	case ev := <-f.batches:
		assert.Equal(t, []string{"op#slow PENDING"}, keys(ev), "retried after the timeout")
	case <-time.After(3 * time.Second):
		t.Fatal("a batch whose invocation timed out was checkpointed as delivered; Lambda would retry it")
	}
	f.put("op#next", map[string]string{"state": "PENDING"})
	assert.Equal(t, []string{"op#next PENDING"}, keys(f.next()), "the retry in time is a success")
}

// A failure naming a record that is not in the batch retries all of it.
func TestAnUnknownFailureIdentifierRetriesTheWholeBatch(t *testing.T) {
	f := newFixture(t)
	f.put("op#1", map[string]string{"state": "PENDING"})
	f.put("op#2", map[string]string{"state": "PENDING"})
	f.respond = func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "not-a-sequence-number"}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	tr := unfiltered()
	tr.ReportBatchItemFailures = true
	tr.MaxBatchingWindow = time.Second
	f.start(tr)
	first := f.next()
	assert.Equal(t, keys(first), keys(f.next()))
}

func TestNewRejectsAnInvalidFilterAMissingStreamAndNoTimeout(t *testing.T) {
	streams, err := engine.StreamsClient(t.Context())
	require.NoError(t, err)
	_, err = streampoll.New(streams, streampoll.Config{StreamARN: "arn", Trigger: streampoll.Trigger{BatchSize: 1, FilterPatterns: []string{`{"dynamodb":"x"}`}}}, nil)
	assert.ErrorContains(t, err, "filter 0")
	_, err = streampoll.New(streams, streampoll.Config{Trigger: streampoll.Trigger{BatchSize: 1}}, nil)
	assert.ErrorContains(t, err, "no stream ARN")
	_, err = streampoll.New(streams, streampoll.Config{StreamARN: "arn", Trigger: streampoll.Trigger{BatchSize: 1}}, nil)
	assert.ErrorContains(t, err, "function timeout", "every invocation would time out")
}
