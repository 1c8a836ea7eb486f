package throughput_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

var (
	measure = flag.Bool("throughput", false, "measure and print the throughput figure (make bench-throughput)")
	rounds  = flag.Int("rounds", 2, "measurement rounds, alternating baseline and write path")
	workers = flag.Int("workers", 2, "concurrent writers in each measurement")
	perRun  = flag.Int("writes", 30, "writes per measurement and round (at most 100, the simulator's orders)")
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// requestCounter counts the DynamoDB requests a client sends, by operation
// (the X-Amz-Target header), retries included.
type requestCounter struct {
	inner dynamodb.HTTPClient
	mu    sync.Mutex
	byOp  map[string]int
}

func (c *requestCounter) Do(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndexByte(op, '.')+1:]
	c.mu.Lock()
	c.byOp[op]++
	c.mu.Unlock()
	return c.inner.Do(r)
}

// take returns the counts since the last take and starts again.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.byOp
	c.byOp = map[string]int{}
	return out
}

// rig is a store on a fresh table behind a counting client, an executor on
// a fake clock and the riskreview family against the Risk API simulator.
type rig struct {
	st      *store.Store
	db      *dynamodb.Client
	counter *requestCounter
	clock   *testclock.Clock
	exec    *tools.Executor
	family  *riskreview.Family
	sim     *riskapi.Server
}

func newRig(t testing.TB) rig {
	t.Helper()
	ctx := context.Background()
	base, err := engine.Client(ctx)
	require.NoError(t, err)
	opts := base.Options()
	counter := &requestCounter{inner: opts.HTTPClient, byOp: map[string]int{}}
	opts.HTTPClient = counter
	db := dynamodb.New(opts)
	st, err := store.New(db, store.Config{Table: enginetest.TableName(t)})
	require.NoError(t, err)
	enginetest.EnsureTable(t, st)

	sim := riskapi.New(riskapi.Config{APIKey: "k", HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewRiskClient(provider.RiskConfig{BaseURL: server.URL, APIKey: "k", MaxConns: 16, Timeout: 2 * time.Second})
	require.NoError(t, err)
	clock := testclock.New(time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC))
	exec, err := tools.NewExecutor(tools.ExecutorConfig{
		Store:  st,
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 5 * time.Second, Downstream: 2 * time.Second, Reserve: 100 * time.Millisecond},
		Clock:  clock.Now,
	})
	require.NoError(t, err)
	counter.take() // table set-up is not part of any path
	return rig{st: st, db: db, counter: counter, clock: clock, exec: exec, family: riskreview.New(client, riskreview.DefaultRecovery()), sim: sim}
}

// order i of the simulator's 100 and the caller that owns it.
func order(i int) (tools.Caller, string) {
	n := i%100 + 1
	tenant := "M1"
	if n > 50 {
		tenant = "M2"
	}
	return tools.Caller{ClientID: "support-assistant", UserID: "user-" + tenant, TenantID: tenant}, fmt.Sprintf("O20260728%03d", n)
}

func (r rig) submit(t testing.TB, operationID string, i int) tools.Submission {
	t.Helper()
	caller, orderID := order(i)
	args, err := json.Marshal(riskreview.Args{OrderID: orderID, Reason: "chargeback pattern", OperationID: operationID})
	require.NoError(t, err)
	sub, err := r.exec.Submit(context.Background(), r.family, caller, args, "")
	require.NoError(t, err)
	return sub
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func format(m map[string]int) string {
	var parts []string
	for op, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", op, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// TestDynamoDBRequestsPerPath pins the requests each path makes; the cost
// per million writes in docs/capacity.md is computed from these.
func TestDynamoDBRequestsPerPath(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	// A process's first write also records its due shard count, once.
	warm := r.submit(t, "op-count-0000", 2)
	require.Equal(t, operation.StateSucceeded, warm.Operation.State)
	once := r.counter.take()

	first := r.submit(t, "op-count-0001", 0)
	require.Equal(t, operation.StateSucceeded, first.Operation.State)
	write := r.counter.take()

	replay := r.submit(t, "op-count-0001", 0)
	require.True(t, replay.Replayed)
	replayed := r.counter.take()

	require.NoError(t, r.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	unknown := r.submit(t, "op-count-0002", 1)
	require.Equal(t, operation.StateUnknown, unknown.Operation.State)
	unknownWrite := r.counter.take()

	svc, err := reconcile.New(reconcile.Config{
		Executor: r.exec, Families: map[string]tools.WriteTool{r.family.Name(): r.family},
		Jitter: func(d time.Duration) time.Duration { return d },
	})
	require.NoError(t, err)
	r.clock.Advance(time.Minute)
	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Examined)
	resolved := r.counter.take()
	got, err := r.st.Get(ctx, unknown.Operation.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, got.State, "one probe found the committed review")
	r.counter.take() // the Get above
	emptySweep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, emptySweep.Examined)
	idle := r.counter.take()

	written, swept := r.st.DueShards()
	t.Logf("DynamoDB requests per path (%d due shards written, %d swept):", written, swept)
	t.Logf("  a process's first write:        %s", format(once))
	t.Logf("  write, SUCCEEDED:               %s", format(write))
	t.Logf("  replay of a SUCCEEDED key:      %s", format(replayed))
	t.Logf("  write left UNKNOWN:             %s", format(unknownWrite))
	t.Logf("  sweep probing it to SUCCEEDED:  %s", format(resolved))
	t.Logf("  idle sweep (nothing due):       %s", format(idle))
	opItem, bkItem := r.itemSize(t, "op#"+got.Handle), r.itemSize(t, "bk#"+got.Key.Tool+"|"+got.BusinessKey)
	t.Logf("item sizes (DynamoDB's size rule, approximate): settled operation %d B, business key %d B", opItem, bkItem)

	require.Equal(t, map[string]int{"TransactWriteItems": 1, "GetItem": 1, "UpdateItem": 2}, once, "a write, and the shard count recorded once per process")
	require.Equal(t, map[string]int{"TransactWriteItems": 1, "GetItem": 1, "UpdateItem": 1}, write, "insert intent and key, fence read before the send, then settle")
	require.Equal(t, map[string]int{"TransactWriteItems": 1}, replayed, "the cancelled insert returns the stored operation")
	require.Equal(t, map[string]int{"TransactWriteItems": 1, "GetItem": 1, "UpdateItem": 1}, unknownWrite)
	require.Equal(t, map[string]int{"GetItem": 1, "Query": swept + 1}, idle,
		"the recorded shard counts, one query per swept shard and one for its tool's parked entries")
	require.Equal(t, map[string]int{"GetItem": 1, "Query": swept + 1, "UpdateItem": 1}, resolved, "the read, then one conditional write")
	require.Less(t, opItem, 4096, "an operation fits one read unit")
}

// itemSize is the stored item's size by DynamoDB's rule (names plus
// values; numbers and containers approximated as documented).
func (r rig) itemSize(t testing.TB, pk string) int {
	t.Helper()
	out, err := r.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(r.st.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
	})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item, pk)
	r.counter.take()
	n := 0
	for name, v := range out.Item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	default:
		return 1
	}
}

// TestThroughputFigure prints the write path's rate against the raw
// conditional-write rate of the same engine, measured in alternating
// rounds of the same run. Run by make bench-throughput.
func TestThroughputFigure(t *testing.T) {
	if !*measure {
		t.Skip("run with -throughput (make bench-throughput)")
	}
	n := *perRun
	require.True(t, n >= 1 && n <= 100, "-writes must be 1 to 100: one distinct order each")
	var raw, rawTx, boundary, path time.Duration
	var boundaryReqs, pathReqs int
	for round := range *rounds {
		// Each figure on a fresh table: the local engine's transactions
		// cost more as a table grows, and the order must not favour one.
		r := newRig(t)
		raw += timed(n, *workers, func(i int) {
			_, err := r.db.PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName: aws.String(r.st.Table()),
				Item: map[string]types.AttributeValue{
					"pk":   &types.AttributeValueMemberS{Value: fmt.Sprintf("raw#%d#%d", round, i)},
					"kind": &types.AttributeValueMemberS{Value: "raw"},
				},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			})
			require.NoError(t, err)
		})
		r = newRig(t)
		rawTx += timed(n, *workers, func(i int) {
			put := func(pk string) types.TransactWriteItem {
				return types.TransactWriteItem{Put: &types.Put{
					TableName: aws.String(r.st.Table()),
					Item: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: pk}, "kind": &types.AttributeValueMemberS{Value: "raw"},
					},
					ConditionExpression: aws.String("attribute_not_exists(pk)"),
				}}
			}
			_, err := r.db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				put(fmt.Sprintf("rawtx#%d#%d#a", round, i)), put(fmt.Sprintf("rawtx#%d#%d#b", round, i)),
			}})
			require.NoError(t, err)
		})
		r = newRig(t)
		boundary += timed(n, *workers, func(i int) {
			op := intent(t, r.clock.Now(), fmt.Sprintf("op-b-%d-%04d", round, i))
			res, err := r.st.InsertIfAbsent(context.Background(), op)
			require.NoError(t, err)
			require.Equal(t, store.Inserted, res.Kind)
			_, err = r.st.Transition(context.Background(), res.Operation, operation.Event{
				Type: operation.EventCreateSucceeded, At: r.clock.Now(), ResourceID: fmt.Sprintf("rv-%d", i),
			})
			require.NoError(t, err)
		})
		boundaryReqs += total(r.counter.take())
		r = newRig(t)
		path += timed(n, *workers, func(i int) {
			sub := r.submit(t, fmt.Sprintf("op-p-%d-%04d", round, i), i)
			require.Equal(t, operation.StateSucceeded, sub.Operation.State)
		})
		pathReqs += total(r.counter.take())
	}
	writes := n * *rounds
	rate := func(d time.Duration) float64 { return float64(writes) / d.Seconds() }
	fmt.Printf("\nthroughput on engine %q: %d writes per figure, %d workers, %d alternating rounds\n", engine.Kind(), writes, *workers, *rounds)
	fmt.Printf("  %-50s %9s %7s %13s\n", "", "ops/s", "ratio", "requests/op")
	fmt.Printf("  %-50s %9.1f %7.2f %13.2f\n", "raw conditional PutItem (baseline)", rate(raw), 1.0, 1.0)
	fmt.Printf("  %-50s %9.1f %7.2f %13.2f\n", "raw conditional TransactWriteItems, 2 puts", rate(rawTx), rate(rawTx)/rate(raw), 1.0)
	fmt.Printf("  %-50s %9.1f %7.2f %13.2f\n", "safety boundary: insert + settle (store)", rate(boundary), rate(boundary)/rate(raw), float64(boundaryReqs)/float64(writes))
	fmt.Printf("  %-50s %9.1f %7.2f %13.2f\n", "write path: Executor.Submit, simulator on loopback", rate(path), rate(path)/rate(raw), float64(pathReqs)/float64(writes))
}

// timed runs do(0..n-1) on w workers and returns the wall time.
func timed(n, w int, do func(i int)) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range w {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				do(i)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// intent is a new PENDING operation with keys of its own.
func intent(t testing.TB, now time.Time, operationID string) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey("bench-client", "M1", "user", riskreview.ToolRequest, operationID)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(key.Tool, "user", map[string]string{"order_id": operationID, "reason": "r"})
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey("risk_review", operationID, riskreview.ReviewType, riskreview.Generation)
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: "user", TenantID: "M1",
		Target:  map[string]string{"order_id": operationID, "review_type": riskreview.ReviewType},
		Payload: map[string]string{"order_id": operationID, "reason": "r", "review_type": riskreview.ReviewType},
	}, now, time.Minute)
	require.NoError(t, err)
	return op
}
