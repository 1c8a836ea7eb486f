package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// engineCalls counts the DynamoDB API calls the replicas make, by action,
// on their way to the shared engine: what a scenario costs the store.
type engineCalls struct {
	getItem, transact, other atomic.Int64
}

func (c *engineCalls) count(r *http.Request) {
	switch target := r.Header.Get("X-Amz-Target"); {
	case strings.HasSuffix(target, ".GetItem"):
		c.getItem.Add(1)
	case strings.HasSuffix(target, ".TransactWriteItems"):
		c.transact.Add(1)
	default:
		c.other.Add(1)
	}
}

// startCountedStack is startStack with the replicas talking to the engine
// through a counting reverse proxy on loopback.
func startCountedStack(t *testing.T, replicas int) (harness, *engineCalls) {
	t.Helper()
	target, err := url.Parse(engine.Endpoint())
	require.NoError(t, err)
	calls := &engineCalls{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	counting := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.count(r)
		proxy.ServeHTTP(w, r)
	}))
	counting.Start()
	t.Cleanup(counting.Close)

	addrs := make([]string, replicas)
	for i := range addrs {
		addrs[i] = "127.0.0.1:0"
	}
	out := &testsync.Buffer{}
	s, err := stack.Start(context.Background(), stack.Config{
		EngineEndpoint: counting.URL, Table: enginetest.TableName(t), MCPAddrs: addrs,
		ResourceURL: "https://intentgate.test/mcp", Out: out,
		Env: map[string]string{
			"INTENTGATE_BUDGET_DOWNSTREAM": "800ms",
			// The simulator's latency also slows the ownership check.
			"INTENTGATE_BUDGET_AUTH": "2s",
			// Eight transactions on one item at once queue on the single-threaded
			// local engine of a shared machine.
			"INTENTGATE_BUDGET_STORE":   "2s",
			"INTENTGATE_BUDGET_RESERVE": "1s",
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Apps[0].Store.DeleteTable(context.Background())
		s.Stop()
	})
	return harness{Stack: s, out: out}, calls
}

// Item: concurrent replays on two replicas return the first attempt's
// business result, not OPERATION_UNKNOWN, and cost the store a bounded
// number of reads, which the test log records.
func TestEightConcurrentCallsWithOneOperationIDOnTwoReplicasReturnOneResult(t *testing.T) {
	h, calls := startCountedStack(t, 2)
	// The provider answers slowly (inside the downstream budget), so the
	// seven replays find the first attempt in flight.
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{LatencyMS: 300}))
	tok := h.token(t, "ALICE")
	const callers = 8
	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		proto := protocolNew
		if i%2 == 1 {
			proto = protocolOld
		}
		sessions[i] = connect(t, h.MCPURLs[i%2], tok, proto)
	}
	getsBefore, transactBefore := calls.getItem.Load(), calls.transact.Load()

	results := make([]map[string]any, callers)
	errs := make([]bool, callers)
	testsync.Race(callers, func(i int) {
		results[i], errs[i] = call(t, sessions[i], riskreview.ToolRequest, reviewArgs("O20260728031", "chargeback pattern", "op-eight-replays-01"))
	})

	gets, transacts := calls.getItem.Load()-getsBefore, calls.transact.Load()-transactBefore
	waiters, waitReads := replayWaits(t, h.out.String())
	for i := range results {
		assert.False(t, errs[i], "call %d: %v", i, results[i])
		assert.Equal(t, results[0], results[i], "call %d returns the same business result as call 0", i)
	}
	assert.Equal(t, "SUCCEEDED", results[0]["status"])
	assert.Equal(t, "committed_and_verified", results[0]["outcome"])
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls, "one downstream create")
	assert.Equal(t, 1, h.Risk.Stats().ReviewsCommitted)
	t.Logf("replay wait cost: %d concurrent calls, 1 create; %d replays waited with %d store reads (%.1f each); "+
		"engine calls in all: %d insert transactions, %d GetItem", callers, waiters, waitReads,
		float64(waitReads)/float64(max(waiters, 1)), transacts, gets)
}

// replayWaits sums the replicas' "replay waited" log lines.
func replayWaits(t *testing.T, logs string) (waiters, reads int) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"replay waited for the first attempt"`) {
			continue
		}
		var rec struct {
			StoreReads int `json:"store_reads"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		waiters++
		reads += rec.StoreReads
	}
	return waiters, reads
}

// Item: two merchants whose assistants share one MCP client never share a
// key space: Bob pre-claiming an operation_id neither blocks Alice's call
// with it nor tells him it exists.
func TestTwoTenantsSharingOneClientNeverCollideOnOperationID(t *testing.T) {
	h := startStack(t, 1, nil)
	require.Equal(t, persona("ALICE").ClientID, persona("BOB").ClientID, "the scenario needs one shared MCP client")
	bob := connect(t, h.MCPURLs[0], h.token(t, "BOB"), protocolNew)
	alice := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)

	bobs, isErr := call(t, bob, riskreview.ToolRequest, reviewArgs("O20260728060", "pre-claim", "op-shared-tenant-01"))
	require.False(t, isErr, bobs)
	alices, isErr := call(t, alice, riskreview.ToolRequest, reviewArgs("O20260728010", "chargeback pattern", "op-shared-tenant-01"))
	require.False(t, isErr, "Alice's call with the same operation_id is hers alone: %v", alices)
	assert.Equal(t, "SUCCEEDED", alices["status"])
	assert.NotEqual(t, bobs["review_id"], alices["review_id"])
	assert.Equal(t, false, alices["deduplicated"])
	assert.Equal(t, 2, h.Risk.Stats().CreateCalls, "each merchant's review was created")

	// Each replay still finds its own tenant's operation.
	again, isErr := call(t, bob, riskreview.ToolRequest, reviewArgs("O20260728060", "pre-claim", "op-shared-tenant-01"))
	require.False(t, isErr, again)
	assert.Equal(t, bobs["review_id"], again["review_id"])
	again, isErr = call(t, alice, riskreview.ToolRequest, reviewArgs("O20260728010", "chargeback pattern", "op-shared-tenant-01"))
	require.False(t, isErr, again)
	assert.Equal(t, alices["review_id"], again["review_id"])
	assert.Equal(t, 2, h.Risk.Stats().CreateCalls)
}

// Item: a key first answered by deduplication is bound to that answer; the
// same key with other arguments is a conflict, never a second ticket.
func TestKeyAnsweredByDeduplicationNeverStartsASecondTicket(t *testing.T) {
	h := startStackWith(t, 1, nil, stack.Config{Clock: newTestClock().Now, ReleaseSearchLag: searchLag})
	cs := connect(t, h.MCPURLs[0], h.token(t, "DEPLOYER"), protocolNew)
	first, isErr := call(t, cs, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-first-01"))
	require.False(t, isErr, first)
	dedup, isErr := call(t, cs, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-subagent-1"))
	require.False(t, isErr, dedup)
	require.Equal(t, true, dedup["deduplicated"])
	require.Equal(t, first["ticket_handle"], dedup["ticket_handle"])

	other, isErr := call(t, cs, release.ToolCreate, ticketArgs("9cd022e", "deploy-op-subagent-1"))
	assert.True(t, isErr)
	assert.Equal(t, "IDEMPOTENCY_CONFLICT", other["code"], "%v", other)
	again, isErr := call(t, cs, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-subagent-1"))
	assert.False(t, isErr, again)
	assert.Equal(t, dedup["ticket_handle"], again["ticket_handle"])
	assert.Equal(t, true, again["deduplicated"], "the same answer as the first time")
	assert.Equal(t, 1, h.Release.Stats().CreateCalls, "one ticket")
}
