package enginecontract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/localengine"
)

// The differential test: the engine's patches that change how answers are
// computed - the TransactWriteItems fast path (fast_transactions.py), the
// attribute value serializer (fast_attribute_values.py) and the
// UpdateExpression parse cache (fast_update_expressions.py) and the indexed
// Query (indexed_queries.py), all in infra/engine - must be
// indistinguishable from stock moto (--stock). Both run side by side; the
// same seeded random sequences of PutItem, UpdateItem, DeleteItem,
// TransactWriteItems (ConditionChecks, cancelled and invalid ones among
// them) and Query (on the table and on the index, whose hash value items
// gain, change and lose; with range conditions, Limit, ExclusiveStartKey,
// descending, filters and projections; every page followed) go to both as
// raw DynamoDB JSON requests, and every answer (status and body), the final
// items and the stream records must be equal.
//
// It compares two local moto engines of its own, and runs when the rest of
// the suite runs on the local engine too.

const (
	differentialSeeds      = 16
	differentialOperations = 60
	diffTable              = "it-differential"
)

func TestFastPathAgainstStockMoto(t *testing.T) {
	if engine.Kind() != localengine.KindMoto {
		t.Skipf("compares the local engine's variants; this run is against %s", engine.Kind())
	}
	stock := startVariant(t, "--stock")
	fast := startVariant(t)
	t.Run("answers_items_and_stream_records_equal", func(t *testing.T) {
		answersExactlyLikeStock(t, stock, fast)
	})
	t.Run("rejects_a_multi_operation_action_before_applying_any", func(t *testing.T) {
		rejectsMultiOperationActionFirst(t, stock, fast)
	})
}

func answersExactlyLikeStock(t *testing.T, stock, fast *rawEngine) {
	ctx := t.Context()
	outcomes := map[string]int{} // what the sequences exercised
	for seed := range uint64(differentialSeeds) {
		t.Run("seed_"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			table := fmt.Sprintf("%s-%d", diffTable, seed)
			for _, e := range []*rawEngine{stock, fast} {
				e.mustCall(t, "DynamoDB_20120810.CreateTable", createTableBody(table))
			}
			gen := newOpGenerator(seed, table)
			for i := range differentialOperations {
				target, body := gen.next()
				want, got := callBoth(t, stock, fast, target, body)
				outcomes[outcome(target, want)]++
				require.Equal(t, want, got, "seed %d operation %d %s\nrequest: %s", seed, i, target, clip(body))
				for page := 2; target == queryTarget && want.Status == http.StatusOK; page++ {
					if n, _ := want.Body.(map[string]any)["Count"].(float64); n > 0 {
						outcomes["Query found items"]++
					}
					next, ok := want.Body.(map[string]any)["LastEvaluatedKey"]
					if !ok {
						break
					}
					outcomes["Query next page"]++
					body["ExclusiveStartKey"] = next
					want, got = callBoth(t, stock, fast, target, body)
					require.Equal(t, want, got, "seed %d operation %d %s page %d\nrequest: %s", seed, i, target, page, clip(body))
				}
			}
			assert.Equal(t, stock.items(t, table), fast.items(t, table), "final items")
			assert.Equal(t, stock.streamRecords(t, table), fast.streamRecords(t, table), "stream records")
			for _, e := range []*rawEngine{stock, fast} {
				e.mustCall(t, "DynamoDB_20120810.DeleteTable", map[string]any{"TableName": table})
			}
		})
		if ctx.Err() != nil {
			return
		}
	}
	t.Logf("outcomes: %v", outcomes)
	// The sequences must keep exercising the paths that matter.
	for _, o := range []string{
		"TransactWriteItems ok", "TransactWriteItems TransactionCanceledException",
		"TransactWriteItems ValidationException", "UpdateItem ValidationException",
		"PutItem ConditionalCheckFailedException", "DeleteItem ok",
		"Query ok", "Query found items", "Query next page",
	} {
		assert.GreaterOrEqual(t, outcomes[o], 5, "outcome %q exercised", o)
	}
}

func outcome(target string, r rawResult) string {
	op := target[strings.LastIndex(target, ".")+1:]
	if r.Status == http.StatusOK {
		return op + " ok"
	}
	if m, ok := r.Body.(map[string]any); ok {
		typ, _ := m["__type"].(string)
		return op + " " + typ[strings.LastIndex(typ, "#")+1:]
	}
	return op + " " + strconv.Itoa(r.Status)
}

// Stock moto raises the "only one of Check, Put, Update or Delete" error in
// the middle of its loop and leaves the actions before it applied; DynamoDB
// validates the whole request first. The fast path applies nothing.
func rejectsMultiOperationActionFirst(t *testing.T, stock, fast *rawEngine) {
	tx := map[string]any{"TransactItems": []any{
		map[string]any{"Put": map[string]any{"TableName": diffTable, "Item": map[string]any{"pk": sv("first")}}},
		map[string]any{
			"Put":    map[string]any{"TableName": diffTable, "Item": map[string]any{"pk": sv("second")}},
			"Delete": map[string]any{"TableName": diffTable, "Key": map[string]any{"pk": sv("second")}},
		},
	}}
	for _, e := range []*rawEngine{stock, fast} {
		e.mustCall(t, "DynamoDB_20120810.CreateTable", createTableBody(diffTable))
		res := e.call(t, "DynamoDB_20120810.TransactWriteItems", tx)
		assert.Equal(t, http.StatusBadRequest, res.Status, "%s: %v", e.name, res.Body)
		assert.Contains(t, fmt.Sprint(res.Body), "can only contain one of", e.name)
	}
	assert.Empty(t, fast.items(t, diffTable), "fast path: nothing applied")
	assert.Len(t, stock.items(t, diffTable), 1, "moto_difference: stock moto leaves the first action applied")
}

// callBoth sends one request to both engines at once (they are separate
// processes) and returns their answers.
func callBoth(t *testing.T, stock, fast *rawEngine, target string, body any) (want, got rawResult) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		want = stock.callNoFatal(t, target, body)
	}()
	got = fast.call(t, target, body)
	<-done
	require.NoError(t, want.err, "stock moto %s", target)
	return want, got
}

// rawEngine speaks DynamoDB's JSON protocol to one local engine.
type rawEngine struct {
	name     string
	endpoint string
	http     *http.Client
}

func startVariant(t *testing.T, args ...string) *rawEngine {
	t.Helper()
	e, err := localengine.StartMoto(t.Context(), args...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Stop()) })
	name := "fast path"
	if len(args) > 0 {
		name = "stock moto"
	}
	return &rawEngine{name: name, endpoint: e.Endpoint(), http: &http.Client{Timeout: time.Minute}}
}

// rawResult is an answer reduced to what a client can observe.
type rawResult struct {
	Status int
	Body   any
	err    error // the request itself failed (not compared)
}

func (e *rawEngine) call(t *testing.T, target string, body any) rawResult {
	t.Helper()
	res := e.callNoFatal(t, target, body)
	require.NoError(t, res.err, "%s %s", e.name, target)
	return res
}

// callNoFatal is call for another goroutine: failures come back in err.
func (e *rawEngine) callNoFatal(t *testing.T, target string, body any) rawResult {
	payload, err := json.Marshal(body)
	if err != nil {
		return rawResult{err: err}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.endpoint+"/", bytes.NewReader(payload))
	if err != nil {
		return rawResult{err: err}
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := e.http.Do(req)
	if err != nil {
		return rawResult{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawResult{err: err}
	}
	res := rawResult{Status: resp.StatusCode}
	if len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &res.Body) != nil {
		res.Body = string(raw) // moto's internal errors answer HTML
	}
	return res
}

func (e *rawEngine) mustCall(t *testing.T, target string, body any) map[string]any {
	t.Helper()
	res := e.call(t, target, body)
	require.Equal(t, http.StatusOK, res.Status, "%s %s: %v", e.name, target, res.Body)
	m, _ := res.Body.(map[string]any)
	return m
}

// items is a consistent scan of the table, sorted by pk.
func (e *rawEngine) items(t *testing.T, table string) []any {
	t.Helper()
	out := e.mustCall(t, "DynamoDB_20120810.Scan", map[string]any{"TableName": table, "ConsistentRead": true})
	items, _ := out["Items"].([]any)
	sort.Slice(items, func(i, j int) bool { return fmt.Sprint(items[i]) < fmt.Sprint(items[j]) })
	return items
}

// streamRecords reads the table's whole stream from TRIM_HORIZON, without
// the two fields that differ by nature (a random eventID, the wall clock).
func (e *rawEngine) streamRecords(t *testing.T, table string) []any {
	t.Helper()
	desc := e.mustCall(t, "DynamoDB_20120810.DescribeTable", map[string]any{"TableName": table})
	arn := desc["Table"].(map[string]any)["LatestStreamArn"]
	sd := e.mustCall(t, "DynamoDBStreams_20120810.DescribeStream", map[string]any{"StreamArn": arn})
	shard := sd["StreamDescription"].(map[string]any)["Shards"].([]any)[0].(map[string]any)["ShardId"]
	it := e.mustCall(t, "DynamoDBStreams_20120810.GetShardIterator", map[string]any{
		"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON",
	})["ShardIterator"]
	var records []any
	for {
		out := e.mustCall(t, "DynamoDBStreams_20120810.GetRecords", map[string]any{"ShardIterator": it})
		batch, _ := out["Records"].([]any)
		if len(batch) == 0 {
			return records
		}
		for _, r := range batch {
			rec := r.(map[string]any)
			delete(rec, "eventID")
			delete(rec["dynamodb"].(map[string]any), "ApproximateCreationDateTime")
			delete(rec["dynamodb"].(map[string]any), "SizeBytes") // counts the timestamp's text
			records = append(records, rec)
		}
		it = out["NextShardIterator"]
	}
}

func createTableBody(table string) map[string]any {
	return map[string]any{
		"TableName":   table,
		"BillingMode": "PAY_PER_REQUEST",
		"AttributeDefinitions": []any{
			map[string]any{"AttributeName": "pk", "AttributeType": "S"},
			map[string]any{"AttributeName": "gsi1pk", "AttributeType": "S"},
			map[string]any{"AttributeName": "gsi1sk", "AttributeType": "S"},
		},
		"KeySchema": []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
		"GlobalSecondaryIndexes": []any{map[string]any{
			"IndexName": "gsi1",
			"KeySchema": []any{
				map[string]any{"AttributeName": "gsi1pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "gsi1sk", "KeyType": "RANGE"},
			},
			"Projection": map[string]any{"ProjectionType": "ALL"},
		}},
		"StreamSpecification": map[string]any{"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"},
	}
}

func sv(v string) map[string]any { return map[string]any{"S": v} }
func nv(v int) map[string]any    { return map[string]any{"N": strconv.Itoa(v)} }

func clip(b any) string {
	var s string
	switch v := b.(type) {
	case []byte:
		s = string(v)
	default:
		raw, _ := json.Marshal(v)
		s = string(raw)
	}
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}

// opGenerator draws requests from a small key space, so conditions often
// fail and actions collide.
type opGenerator struct {
	r     *rand.Rand
	table string
	keys  []string
}

func newOpGenerator(seed uint64, table string) *opGenerator {
	return &opGenerator{r: rand.New(rand.NewPCG(seed, 0x5eed)), table: table, keys: []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}}
}

func (g *opGenerator) chance(pct int) bool { return g.r.IntN(100) < pct }
func (g *opGenerator) key() string         { return g.keys[g.r.IntN(len(g.keys))] }

const queryTarget = "DynamoDB_20120810.Query"

func (g *opGenerator) next() (string, map[string]any) {
	if g.chance(20) {
		return queryTarget, g.query()
	}
	switch p := g.r.IntN(100); {
	case p < 18:
		put := g.put(g.key())
		if g.chance(30) {
			put["ReturnValues"] = "ALL_OLD"
		}
		return "DynamoDB_20120810.PutItem", put
	case p < 36:
		up := g.update(g.key())
		up["ReturnValues"] = []string{"NONE", "ALL_NEW", "UPDATED_OLD", "ALL_OLD"}[g.r.IntN(4)]
		return "DynamoDB_20120810.UpdateItem", up
	case p < 45:
		del := g.delete(g.key())
		if g.chance(50) {
			del["ReturnValues"] = "ALL_OLD"
		}
		return "DynamoDB_20120810.DeleteItem", del
	default:
		return "DynamoDB_20120810.TransactWriteItems", g.transaction()
	}
}

func (g *opGenerator) transaction() map[string]any {
	if g.chance(3) { // more than 100 actions
		actions := make([]any, 101)
		for i := range actions {
			actions[i] = map[string]any{"ConditionCheck": map[string]any{
				"TableName": g.table, "Key": map[string]any{"pk": sv("many" + strconv.Itoa(i))},
				"ConditionExpression": "attribute_not_exists(pk)",
			}}
		}
		return map[string]any{"TransactItems": actions}
	}
	n := 1 + g.r.IntN(4)
	order := g.r.Perm(len(g.keys))
	actions := make([]any, 0, n)
	for i := range n {
		k := g.keys[order[i]]
		if i > 0 && g.chance(8) {
			k = g.keys[order[0]] // two actions on one item
		}
		action := g.action(k)
		if i == 0 && g.chance(3) { // two operations in one action (validated first by both)
			action["Delete"] = g.delete(k)
		}
		actions = append(actions, action)
	}
	return map[string]any{"TransactItems": actions}
}

func (g *opGenerator) action(k string) map[string]any {
	var kind string
	var op map[string]any
	switch p := g.r.IntN(100); {
	case p < 30:
		kind, op = "Put", g.put(k)
	case p < 60:
		kind, op = "Update", g.update(k)
	case p < 75:
		kind, op = "Delete", g.delete(k)
	case p < 96:
		kind, op = "ConditionCheck", g.delete(k)
		if op["ConditionExpression"] == nil {
			op["ConditionExpression"] = "attribute_exists(pk)"
		}
	default:
		kind, op = "Frobnicate", g.delete(k) // unsupported
	}
	if g.chance(4) {
		op["TableName"] = "it-missing"
	}
	delete(op, "ReturnValues")
	if op["ConditionExpression"] != nil && g.chance(50) {
		op["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
	}
	return map[string]any{kind: op}
}

func (g *opGenerator) put(k string) map[string]any {
	item := map[string]any{"pk": sv(k), "v": nv(g.r.IntN(6)), "s": sv("s" + strconv.Itoa(g.r.IntN(4)))}
	if g.chance(60) {
		item["gsi1pk"] = sv(g.indexValue())
		item["gsi1sk"] = sv(strconv.Itoa(g.r.IntN(1000)))
	}
	if g.chance(2) {
		item["blob"] = sv(strings.Repeat("x", 410*1024)) // over the item size limit
	}
	put := map[string]any{"TableName": g.table, "Item": item}
	switch g.r.IntN(3) {
	case 1:
		put["ConditionExpression"] = "attribute_not_exists(pk)"
	case 2:
		put["ConditionExpression"] = "v = :v"
		put["ExpressionAttributeValues"] = map[string]any{":v": nv(g.r.IntN(6))}
	}
	if put["ConditionExpression"] != nil && g.chance(50) {
		put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
	}
	return put
}

func (g *opGenerator) update(k string) map[string]any {
	type form struct {
		expr   string
		values map[string]any
	}
	forms := []form{
		{"SET v = if_not_exists(v, :zero) + :one, s = :s", map[string]any{":zero": nv(0), ":one": nv(1), ":s": sv("u" + strconv.Itoa(g.r.IntN(4)))}},
		{"REMOVE gsi1pk, gsi1sk", nil},
		{"SET gsi1pk = :due, gsi1sk = :at", map[string]any{":due": sv(g.indexValue()), ":at": sv(strconv.Itoa(g.r.IntN(1000)))}},
		{"ADD cnt :one", map[string]any{":one": nv(1)}},
		{"SET lst = list_append(if_not_exists(lst, :empty), :l)", map[string]any{":empty": map[string]any{"L": []any{}}, ":l": map[string]any{"L": []any{sv("e" + strconv.Itoa(g.r.IntN(9)))}}}},
		{"SET v = nope + :one", map[string]any{":one": nv(1)}},                         // invalid unless nope exists: it never does
		{"SET blob = :big", map[string]any{":big": sv(strings.Repeat("y", 410*1024))}}, // item too large
		{"SET v = :one REMOVE v", map[string]any{":one": nv(1)}},                       // overlapping paths
	}
	weights := []int{30, 15, 15, 12, 12, 6, 3, 7}
	f := forms[pick(g.r, weights)]
	up := map[string]any{"TableName": g.table, "Key": map[string]any{"pk": sv(k)}, "UpdateExpression": f.expr}
	values := map[string]any{}
	for name, v := range f.values {
		values[name] = v
	}
	switch g.r.IntN(3) {
	case 1:
		up["ConditionExpression"] = "attribute_exists(pk)"
	case 2:
		up["ConditionExpression"] = "v < :lim"
		values[":lim"] = nv(g.r.IntN(6))
	}
	if len(values) > 0 {
		up["ExpressionAttributeValues"] = values
	}
	return up
}

// indexValue is an index hash value: items move between the two.
func (g *opGenerator) indexValue() string { return []string{"due", "late"}[g.r.IntN(2)] }

// query draws a Query on the index (most) or on the table.
func (g *opGenerator) query() map[string]any {
	q := map[string]any{"TableName": g.table}
	values := map[string]any{}
	if g.chance(20) {
		q["KeyConditionExpression"] = "pk = :k"
		values[":k"] = sv(g.key())
	} else {
		q["IndexName"] = "gsi1"
		q["KeyConditionExpression"] = "gsi1pk = :h"
		values[":h"] = sv([]string{"due", "late", "never"}[pick(g.r, []int{45, 45, 10})])
		switch g.r.IntN(4) {
		case 1:
			q["KeyConditionExpression"] = "gsi1pk = :h AND gsi1sk BETWEEN :lo AND :hi"
			values[":lo"], values[":hi"] = sv("2"), sv("7")
		case 2:
			q["KeyConditionExpression"] = "gsi1pk = :h AND begins_with(gsi1sk, :p)"
			values[":p"] = sv(strconv.Itoa(1 + g.r.IntN(9)))
		case 3:
			q["KeyConditionExpression"] = "gsi1pk = :h AND gsi1sk > :lo"
			values[":lo"] = sv(strconv.Itoa(g.r.IntN(1000)))
		}
		if g.chance(10) { // a start key that is no page's end
			q["ExclusiveStartKey"] = map[string]any{"pk": sv(g.key()), "gsi1pk": values[":h"], "gsi1sk": sv(strconv.Itoa(g.r.IntN(1000)))}
		}
	}
	if g.chance(70) {
		q["Limit"] = 1 + g.r.IntN(2)
	}
	if g.chance(40) {
		q["ScanIndexForward"] = false
	}
	if g.chance(20) {
		q["FilterExpression"] = "v > :v"
		values[":v"] = nv(g.r.IntN(6))
	}
	if g.chance(15) {
		q["ProjectionExpression"] = "pk, s"
	}
	q["ExpressionAttributeValues"] = values
	return q
}

func (g *opGenerator) delete(k string) map[string]any {
	del := map[string]any{"TableName": g.table, "Key": map[string]any{"pk": sv(k)}}
	switch g.r.IntN(3) {
	case 1:
		del["ConditionExpression"] = "attribute_exists(s)"
	case 2:
		del["ConditionExpression"] = "s = :s"
		del["ExpressionAttributeValues"] = map[string]any{":s": sv("s" + strconv.Itoa(g.r.IntN(4)))}
	}
	return del
}

func pick(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
