package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeError is the code a write tool answers when the store failed.
const storeError = "TEMPORARY_UNAVAILABLE"

// A devstack that has served many writes answers like a fresh one: 1,000
// sequential writes across both write tools, none answered with a store
// error, first answers included (the engine's cost must not grow with the
// table's history, and no pause of the one-request-at-a-time engine may
// outlast the store budget).
func TestThousandSequentialWritesAcrossBothToolsHaveNoStoreError(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 writes")
	}
	d := startDevstack(t)
	alice := connect(t, d.env["MCP_URL"], d.env["TOKEN_ALICE"])
	deployer := connect(t, d.env["MCP_URL"], d.env["TOKEN_DEPLOYER"])
	codes := map[string]int{}
	var storeErrors []string
	var firstHundred, lastHundred time.Duration
	const writes = 1000
	for i := range writes {
		started := time.Now()
		write := func() map[string]any {
			if i%2 == 0 {
				// 50 orders belong to M1: later reviews of an order meet its
				// business key (a cancelled insert transaction), also a write.
				return callTool(t, alice, "request_risk_review", map[string]any{
					"order_id": fmt.Sprintf("O20260728%03d", 1+(i/2)%50), "reason": "acceptance",
					"operation_id": fmt.Sprintf("acc-review-%04d", i)})
			}
			return callTool(t, deployer, "create_deployment_ticket", map[string]any{
				"service": "payments-api", "commit": fmt.Sprintf("%040x", 0xacc0000+i), "environment": "production-eu",
				"operation_id": fmt.Sprintf("acc-ticket-%04d", i)})
		}
		res := write()
		took := time.Since(started)
		switch {
		case i < 100:
			firstHundred += took
		case i >= writes-100:
			lastHundred += took
		}
		code, _ := res["code"].(string)
		status, _ := res["status"].(string)
		codes[code+"/"+status]++
		if code == storeError {
			// Retried as the answer asks (same operation_id), so the report
			// also says whether the caller could get past it.
			again, _ := write()["code"].(string)
			storeErrors = append(storeErrors, fmt.Sprintf("write %d after %s (retry answered %q): %v",
				i, took, again, res["message"]))
		}
	}
	t.Logf("answers (code/status): %v", sortedCounts(codes))
	t.Logf("mean latency: first 100 writes %s, last 100 writes %s", firstHundred/100, lastHundred/100)
	assert.Empty(t, storeErrors, "first answers that were store errors")
	assert.Positive(t, codes["/SUCCEEDED"], "writes succeeded")
}

// Eight concurrent calls with one operation_id: one dispatch, the others
// replay or wait on it; none is answered with a store error at the default
// store budget.
func TestEightConcurrentCallsWithOneOperationIDHaveNoStoreError(t *testing.T) {
	d := startDevstack(t)
	deployer := connect(t, d.env["MCP_URL"], d.env["TOKEN_DEPLOYER"])
	// Warm the path once (another operation), as a running devstack is.
	callTool(t, deployer, "create_deployment_ticket", map[string]any{"service": "orders-api", "commit": "0000001000000000000000000000000000000000",
		"environment": "staging", "operation_id": "acc-warm"})

	args := map[string]any{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu",
		"operation_id": "acc-storm-1"}
	var wg sync.WaitGroup
	results := make([]map[string]any, 8)
	start := make(chan struct{})
	for i := range results {
		wg.Go(func() {
			<-start
			results[i] = callTool(t, deployer, "create_deployment_ticket", args)
		})
	}
	close(start)
	wg.Wait()
	handles := map[any]int{}
	for i, res := range results {
		assert.NotEqual(t, storeError, res["code"], "call %d: %v", i, res)
		handles[res["ticket_handle"]]++
	}
	assert.Len(t, handles, 1, "every call names the same operation: %v", handles)
	assert.LessOrEqual(t, ticketsFor(t, d.env["RELEASE_API_URL"], "payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"), 1,
		"the storm dispatched at most one ticket")
}

func sortedCounts(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// ticketsFor is the Release API simulator's count of tickets created for
// one service/commit/environment.
func ticketsFor(t *testing.T, url, target string) int {
	t.Helper()
	resp, err := http.Get(url + "/_sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		TicketsByTarget map[string]int `json:"tickets_by_target"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st.TicketsByTarget[target]
}
