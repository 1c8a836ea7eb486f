package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// auditLines decodes the audit records (tool calls, transitions,
// reconciler decisions) in the stack's output.
func auditLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `"operation_hash"`) {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		recs = append(recs, rec)
	}
	return recs
}

// Item: an auditor joining records on operation_hash never merges two
// tenants' operations, even when their assistants share one MCP client and
// chose the same operation_id: the write path's tool call and transition
// records and the reconciler's decisions each correlate per tenant.
func TestTwoTenantsWithOneClientAndOneOperationIDAuditAsTwoOperations(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, nil, stack.Config{Clock: clock.Now})
	require.Equal(t, persona("ALICE").ClientID, persona("BOB").ClientID, "the scenario needs one shared MCP client")
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 2}}}))
	const opID = "op-audit-tenant-01"
	for _, c := range []struct{ persona, order string }{{"ALICE", "O20260728011"}, {"BOB", "O20260728061"}} {
		cs := connect(t, h.MCPURLs[0], h.token(t, c.persona), protocolNew)
		res, _ := call(t, cs, riskreview.ToolRequest, reviewArgs(c.order, "chargeback pattern", opID))
		require.Equal(t, "UNKNOWN", res["status"], "%s: %v", c.persona, res)
	}
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, rep.Transitions, "the reconciler settled both")

	hashes := map[string]map[string]bool{} // end user -> operation_hash values
	kinds := map[string]map[string]bool{}  // end user -> record kinds seen
	for _, rec := range auditLines(t, h.out.String()) {
		user, _ := rec["end_user_principal"].(string)
		if hashes[user] == nil {
			hashes[user], kinds[user] = map[string]bool{}, map[string]bool{}
		}
		hashes[user][rec["operation_hash"].(string)] = true
		kinds[user][rec["kind"].(string)] = true
	}
	for _, user := range []string{"alice", "bob"} {
		assert.Equal(t, map[string]bool{"tool_call": true, "transition": true, "reconcile": true}, kinds[user],
			"%s: the write path and the reconciler both recorded", user)
		assert.Len(t, hashes[user], 1, "%s: one operation, one operation_hash on every record", user)
	}
	for hash := range hashes["alice"] {
		assert.NotContains(t, hashes["bob"], hash, "Alice's (M1) and Bob's (M2) operations never correlate as one")
	}
}

// Item: a caller of another tenant on the same MCP client who may see an
// operation (here a team granted the same service) is never shown the
// creator's operation_id, and is never told to read the operation by it:
// under the caller's own scope that key names another operation (here the
// caller's own ticket for another commit), or none.
func TestOperationOfAnotherTenantOnTheSameClientIsNamedByHandleNotByItsKey(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, map[string]string{
		"INTENTGATE_DEPLOY_GRANTS": stack.DeployGrants + ";team-platform=payments-api",
	}, stack.Config{Clock: clock.Now, ReleaseSearchLag: searchLag})
	dana := connect(t, h.MCPURLs[0], h.token(t, "DEPLOYER"), protocolNew)
	samPersona := persona("DEPLOYER")
	samPersona.Subject, samPersona.Merchant = "sam", "team-platform" // same client, another team granted the service
	samToken, err := h.Token(samPersona, time.Hour)
	require.NoError(t, err)
	sam := connect(t, h.MCPURLs[0], samToken, protocolNew)

	const danasKey = "deploy-op-tenant-0001"
	danas, isErr := call(t, dana, release.ToolCreate, ticketArgs("8bc911d", danasKey))
	require.False(t, isErr, danas)
	// Sam's own ticket for another commit, under the key Dana chose.
	sams, isErr := call(t, sam, release.ToolCreate, ticketArgs("9cd022e", danasKey))
	require.False(t, isErr, sams)
	require.NotEqual(t, danas["ticket_handle"], sams["ticket_handle"], "one key, two tenants: two operations")

	dedup, isErr := call(t, sam, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-tenant-0002"))
	require.False(t, isErr, dedup)
	require.Equal(t, true, dedup["deduplicated"])
	require.Equal(t, danas["ticket_handle"], dedup["ticket_handle"])
	assert.Nil(t, dedup["operation_id"], "Dana's key is not Sam's to know")
	next := dedup["next_action"].(map[string]any)
	assert.Equal(t, map[string]any{"handle": danas["ticket_handle"]}, next["arguments"], "the operation is named by its handle")
	followed, isErr := call(t, sam, packet.ToolGetOperation, next["arguments"].(map[string]any))
	require.False(t, isErr, followed)
	assert.Equal(t, danas["ticket_handle"], followed["handle"], "following next_action reads the operation it answered with")

	read, isErr := call(t, sam, packet.ToolGetOperation, map[string]any{"handle": danas["ticket_handle"]})
	require.False(t, isErr, read)
	assert.Nil(t, read["operation_id"], "the review packet shows the viewer's own key only")
	approved, _ := call(t, sam, release.ToolApprove, map[string]any{"ticket_handle": danas["ticket_handle"]})
	assert.NotEqual(t, danasKey, approved["operation_id"], "approve_rollout shows the viewer's own key only: %v", approved)
}

// Item: a task is a replay of the call for whoever holds its id, and shows
// the operation's operation_id only in the key space that chose it. A
// tenant-mate on another client, whose call was deduplicated onto Alice's
// unsettled review and so got a task for it, never reads Alice's key there.
func TestTaskOfADeduplicatedCallShowsOnlyTheViewersOwnKey(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	aliceTok := h.token(t, "ALICE")
	carol := persona("ALICE")
	carol.Subject, carol.ClientID = "carol", "merchant-console" // M1, another MCP client
	carolTok, err := h.Token(carol, time.Hour)
	require.NoError(t, err)

	const alicesKey = "op-task-tenant-01"
	alices := decodeTask(t, rpc(t, h.MCPURLs[0], aliceTok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728042", "dropped", alicesKey)}, true))
	require.Equal(t, "working", alices.Status)
	carols := decodeTask(t, rpc(t, h.MCPURLs[0], carolTok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728042", "same order", "op-task-tenant-02")}, true))
	require.Equal(t, "working", carols.Status, "deduplicated onto Alice's unsettled review, which Carol's merchant may see")
	require.NotEqual(t, alices.TaskID, carols.TaskID, "each key names its own task; Carol's reads Alice's operation")

	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	forCarol := decodeTask(t, getTask(t, h.MCPURLs[0], carolTok, carols.TaskID))
	require.Equal(t, "completed", forCarol.Status, forCarol.StatusMessage)
	sc := forCarol.Result["structuredContent"].(map[string]any)
	assert.Equal(t, "SUCCEEDED", sc["status"])
	assert.NotContains(t, sc, "operation_id", "Alice's key is not another client's to know")
	assert.Equal(t, true, sc["deduplicated"], "Carol's task is her call's replay: deduplicated")
	status, isErr := call(t, connect(t, h.MCPURLs[0], carolTok, protocolNew), riskreview.ToolStatus, map[string]any{"review_id": sc["review_id"]})
	require.False(t, isErr, status)
	assert.NotContains(t, status, "operation_id", "the task reads like the status tool")

	forAlice := decodeTask(t, getTask(t, h.MCPURLs[0], aliceTok, alices.TaskID))
	assert.Equal(t, alicesKey, forAlice.Result["structuredContent"].(map[string]any)["operation_id"], "the creator's replay shows her own key")
}

// Item: audit records name the tenant the end user acted for. Subjects are
// not unique across tenants (the same sub under another merchant is another
// principal), so client and end user alone would merge two tenants' calls,
// refusals included, into one principal's.
func TestAuditRecordsTellTwoTenantsOfOneSubjectApart(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, nil, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 2}}}))
	other := persona("ALICE")
	other.Merchant = "M2" // same sub, same client, another merchant
	otherTok, err := h.Token(other, time.Hour)
	require.NoError(t, err)
	alice := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	alice2 := connect(t, h.MCPURLs[0], otherTok, protocolNew)

	const opID = "op-audit-tenant-02"
	res, _ := call(t, alice, riskreview.ToolRequest, reviewArgs("O20260728012", "r", opID))
	require.Equal(t, "UNKNOWN", res["status"], res)
	res, _ = call(t, alice2, riskreview.ToolRequest, reviewArgs("O20260728062", "r", opID))
	require.Equal(t, "UNKNOWN", res["status"], res)
	refused, _ := call(t, alice2, riskreview.ToolRequest, reviewArgs("O20260728013", "r", "op-audit-tenant-03"))
	require.Equal(t, "FORBIDDEN", refused["code"])
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	tenantsByHash := map[string]map[any]bool{}
	kinds := map[string]bool{}
	var refusals []map[string]any
	for _, rec := range auditLines(t, h.out.String()) {
		hash := rec["operation_hash"].(string)
		if tenantsByHash[hash] == nil {
			tenantsByHash[hash] = map[any]bool{}
		}
		tenantsByHash[hash][rec["tenant"]] = true
		kinds[rec["kind"].(string)] = true
	}
	for _, line := range strings.Split(h.out.String(), "\n") {
		if strings.Contains(line, `"msg":"audit"`) && strings.Contains(line, `"code":"FORBIDDEN"`) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			refusals = append(refusals, rec)
		}
	}
	assert.Equal(t, map[string]bool{"tool_call": true, "transition": true, "reconcile": true}, kinds)
	require.Len(t, tenantsByHash, 2, "two operations")
	seen := map[any]bool{}
	for hash, tenants := range tenantsByHash {
		assert.Len(t, tenants, 1, "%s: every record of one operation names its one tenant: %v", hash, tenants)
		for tenant := range tenants {
			seen[tenant] = true
		}
	}
	assert.Equal(t, map[any]bool{"M1": true, "M2": true}, seen)
	require.Len(t, refusals, 1)
	assert.Equal(t, "alice", refusals[0]["end_user_principal"])
	assert.Equal(t, "M2", refusals[0]["tenant"], "a refusal names whose tenant was refused")
}

// Item: a caller of another tenant who holds a task id (its call was
// deduplicated onto the operation, which its grant lets it see) may read
// the task but not withdraw the operation: seeing is not owning. Only the
// operation's own end user (tenant and subject) or an operator cancels it,
// and not while another request waits on it, as this one does.
func TestAnotherTenantsTaskMayBeReadButNotCancelled(t *testing.T) {
	clock := newTestClock()
	env := map[string]string{"INTENTGATE_DEPLOY_GRANTS": stack.DeployGrants + ";team-platform=payments-api"}
	for k, v := range taskKeyEnv {
		env[k] = v
	}
	h := startStackWith(t, 1, env, stack.Config{Clock: clock.Now, ReleaseSearchLag: searchLag})
	danaTok := h.token(t, "DEPLOYER")
	sam := persona("DEPLOYER")
	sam.Subject, sam.Merchant = "sam", "team-platform" // same client, another team granted the service
	samTok, err := h.Token(sam, time.Hour)
	require.NoError(t, err)

	require.NoError(t, h.Release.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	danas := decodeTask(t, rpc(t, h.MCPURLs[0], danaTok, "tools/call", release.ToolCreate,
		map[string]any{"name": release.ToolCreate, "arguments": ticketArgs("8bc911d", "deploy-op-cancel-01")}, true))
	require.Equal(t, "working", danas.Status)
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	// Step the reconciler until it has proven the create absent, and stop
	// there, before it claims the re-send.
	retry := danas
	for range 30 {
		clock.Advance(2 * time.Second)
		_, err = svc.Sweep(context.Background())
		require.NoError(t, err)
		if retry = decodeTask(t, getTask(t, h.MCPURLs[0], danaTok, danas.TaskID)); !strings.Contains(retry.StatusMessage, "UNKNOWN") {
			break
		}
	}
	require.Contains(t, retry.StatusMessage, "RETRYABLE", "proven unsent, awaiting the reconciler's re-send")

	sams := decodeTask(t, rpc(t, h.MCPURLs[0], samTok, "tools/call", release.ToolCreate,
		map[string]any{"name": release.ToolCreate, "arguments": ticketArgs("8bc911d", "deploy-op-cancel-02")}, true))
	require.NotEqual(t, danas.TaskID, sams.TaskID, "deduplicated onto Dana's operation, which Sam's grant lets him see, under his own task")
	read := decodeTask(t, getTask(t, h.MCPURLs[0], samTok, sams.TaskID))
	assert.Contains(t, read.StatusMessage, "RETRYABLE")

	// By his own task id (his key, bound to Dana's operation) or by
	// Dana's, Sam reads the operation and may not withdraw it: his cancel
	// is acknowledged (cancellation is cooperative) and withdraws nothing.
	for _, id := range []string{sams.TaskID, danas.TaskID} {
		kept := cancelDecision(t, rpc(t, h.MCPURLs[0], samTok, "tasks/cancel", id, map[string]any{"taskId": id}, true))
		assert.Equal(t, false, kept["withdrawn"], "another tenant may not withdraw Dana's team's operation")
		assert.Contains(t, kept["reason"], "only the end user who requested the operation")
	}
	// Someone who may not see Dana's operation cannot tell Sam's task id
	// from one that names nothing.
	alice := h.token(t, "ALICE")
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		f := rpc(t, h.MCPURLs[0], alice, m, sams.TaskID, map[string]any{"taskId": sams.TaskID}, true)
		u := rpc(t, h.MCPURLs[0], alice, m, "tsk_x", map[string]any{"taskId": "tsk_x"}, true)
		require.NotNil(t, f.Error, m)
		assert.Equal(t, u.Error, f.Error, m)
		assert.Equal(t, u.status, f.status, m)
	}
	still := decodeTask(t, getTask(t, h.MCPURLs[0], danaTok, danas.TaskID))
	assert.Contains(t, still.StatusMessage, "RETRYABLE", "nothing was withdrawn")

	// Nor may Dana now: Sam's call was answered with her operation and
	// waits on it, and her withdrawal would answer his replay FAILED for a
	// cancel he never sent.
	ack := cancelDecision(t, rpc(t, h.MCPURLs[0], danaTok, "tasks/cancel", danas.TaskID, map[string]any{"taskId": danas.TaskID}, true))
	assert.Equal(t, false, ack["withdrawn"], "another tenant's call waits on it: %v", ack)
	assert.Contains(t, ack["reason"], "another request")
	again := decodeTask(t, getTask(t, h.MCPURLs[0], samTok, sams.TaskID))
	assert.Contains(t, again.StatusMessage, "RETRYABLE", "Sam's task is not cancelled by Dana")
}

// At 2025-11-25 too, seeing is not owning, and the answer to a caller who
// may not withdraw the operation is that, whatever its state: a colleague
// of another team is not told "already terminal" (an answer about the
// operation's life) where its owner would be, but that it is not theirs.
func TestAnotherTenantsTerminalTaskRefusesTheirCancelAsNotTheirsAtTheOlderRevision(t *testing.T) {
	env := map[string]string{"INTENTGATE_DEPLOY_GRANTS": stack.DeployGrants + ";team-platform=payments-api"}
	for k, v := range taskKeyEnv {
		env[k] = v
	}
	h := startStackWith(t, 1, env, stack.Config{ReleaseSearchLag: searchLag})
	danaTok := h.token(t, "DEPLOYER")
	sam := persona("DEPLOYER")
	sam.Subject, sam.Merchant = "sam", "team-platform"
	samTok, err := h.Token(sam, time.Hour)
	require.NoError(t, err)

	danas := callToolAsTaskV1(t, h.MCPURLs[0], danaTok, release.ToolCreate, ticketArgs("8bc911e", "deploy-op-v1cncl-01"))
	require.Equal(t, "completed", danas.Status)
	sams := callToolAsTaskV1(t, h.MCPURLs[0], samTok, release.ToolCreate, ticketArgs("8bc911e", "deploy-op-v1cncl-02"))
	require.NotEqual(t, danas.TaskID, sams.TaskID, "deduplicated onto Dana's operation, which Sam's grant lets him see, under his own task")

	refused := rpcV1(t, h.MCPURLs[0], samTok, "tasks/cancel", map[string]any{"taskId": sams.TaskID})
	require.NotNil(t, refused.Error)
	assert.Equal(t, int64(-32602), refused.Error.Code)
	assert.Contains(t, refused.Error.Message, "only the end user who requested the operation, or an operator, may withdraw it")

	own := rpcV1(t, h.MCPURLs[0], danaTok, "tasks/cancel", map[string]any{"taskId": danas.TaskID})
	require.NotNil(t, own.Error, "a terminal task refuses cancellation at 2025-11-25")
	assert.Equal(t, int64(-32602), own.Error.Code)
	assert.Contains(t, own.Error.Message, "already terminal", "its owner is told why")
}
