package stack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// Denial evals: dependent actions refused while a ticket's creation is
// unknown, and callers refused what they may not see or do, through MCP,
// with the reconciler running on the same table. The clock is shared and advanced by the test.

const searchLag = 3 * time.Second

type ticketRig struct {
	harness
	clock      *testclock.Clock
	reconciler *reconcile.Service
	deployer   *mcp.ClientSession
}

func newTicketRig(t *testing.T) ticketRig {
	t.Helper()
	clock := newTestClock()
	h := startStackWith(t, 1, nil, stack.Config{Clock: clock.Now, ReleaseSearchLag: searchLag})
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	return ticketRig{harness: h, clock: clock, reconciler: svc, deployer: connect(t, h.MCPURLs[0], h.token(t, "DEPLOYER"), protocolNew)}
}

// ticketArgs names the commit by its first seven digits, as people do;
// the tool takes only full ids, so the helper completes it (fullCommit).
func ticketArgs(abbrev, opID string) map[string]any {
	return map[string]any{"service": "payments-api", "commit": fullCommit(abbrev), "environment": "production-eu", "operation_id": opID}
}

// fullCommit completes a seven-digit abbreviation to a 40-digit commit id
// with a tail every test commit shares: "8bc911d" is the README's commit.
func fullCommit(abbrev string) string {
	const tail = "0a3c4e5f60718293a4b5c6d7e8f901234"
	return abbrev + tail[len(tail)-(40-len(abbrev)):]
}

func (r ticketRig) sweep(t *testing.T) reconcile.SweepReport {
	t.Helper()
	rep, err := r.reconciler.Sweep(context.Background())
	require.NoError(t, err)
	return rep
}

func (r ticketRig) packet(t *testing.T, opID string) map[string]any {
	t.Helper()
	p, isErr := call(t, r.deployer, packet.ToolGetOperation, map[string]any{"operation_id": opID})
	require.False(t, isErr, p)
	return p
}

func (r ticketRig) approve(t *testing.T, opID string) (map[string]any, bool) {
	t.Helper()
	return call(t, r.deployer, release.ToolApprove, map[string]any{"operation_id": opID})
}

func (r ticketRig) setFaults(t *testing.T, f releaseapi.Faults) {
	t.Helper()
	require.NoError(t, r.Release.SetFaults(f))
}

func timelineEvents(p map[string]any) []string {
	var out []string
	for _, e := range p["timeline"].([]any) {
		out = append(out, e.(map[string]any)["event"].(string))
	}
	return out
}

func TestDenialEval_timeout_after_provider_commit_verify_existing_effect(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})
	res, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-ticket-payments-8bc911d"))
	assert.True(t, isErr)
	assert.Equal(t, "UNKNOWN", res["status"])
	assert.Equal(t, "OPERATION_UNKNOWN", res["code"])
	assert.Equal(t, false, res["retry_allowed"])

	r.clock.Advance(time.Minute) // past the settle window and the index lag
	rep := r.sweep(t)
	assert.Equal(t, 1, rep.Transitions)

	p := r.packet(t, "deploy-ticket-payments-8bc911d")
	assert.Equal(t, "committed_and_verified", p["outcome"])
	assert.EqualValues(t, 1, p["attempts"])
	assert.EqualValues(t, 0, p["duplicate_resources"])
	assert.NotEmpty(t, p["resource_id"])
	assert.NotEmpty(t, p["effect_receipt"])
	assert.Equal(t, true, p["dependent_actions_blocked_while_unknown"])
	assert.Contains(t, timelineEvents(p), "reconciliation_check")
	st := r.Release.Stats()
	assert.Equal(t, 1, st.CreateCalls)
	assert.Equal(t, 1, st.TicketsCommitted, "one ticket exists")
	// The ticket was found by search: the Release API keeps no request
	// identity, so until the duplicate audit has looked past the create's
	// commit deadline and the grace, it is not shown to be the only one.
	refused, isErr := r.approve(t, "deploy-ticket-payments-8bc911d")
	require.True(t, isErr, refused)
	assert.Contains(t, refused["message"], "found by a search, not named by the create's own answer")

	r.clock.Advance(time.Minute) // past the commit deadline, the grace and the settle window
	rep = r.sweep(t)
	assert.Equal(t, 1, rep.Transitions, "the duplicate audit")
	after := r.packet(t, "deploy-ticket-payments-8bc911d")
	assert.Equal(t, []string{"intent_recorded", "provider_dispatch_started", "response_missing", "reconciliation_check", "reconciliation_check"},
		timelineEvents(after), "the probe, then the audit")
	assert.Equal(t, false, after["dependent_actions_blocked"])
	_, isErr = r.approve(t, "deploy-ticket-payments-8bc911d")
	assert.False(t, isErr, "the verified ticket may be approved")
}

func TestDenialEval_retry_uses_new_operation_id_deny_new_intent(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})
	first, _ := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-first-01"))
	require.Equal(t, "UNKNOWN", first["status"])
	second, _ := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-second-1"))
	assert.Equal(t, true, second["deduplicated"])
	assert.Equal(t, first["ticket_handle"], second["ticket_handle"], "the caller gets the existing operation")
	assert.Equal(t, 1, r.Release.Stats().CreateCalls, "no second create")
}

func TestDenialEval_same_key_changed_target_deny_digest_conflict(t *testing.T) {
	r := newTicketRig(t)
	_, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-digest-1"))
	require.False(t, isErr)
	for name, args := range map[string]map[string]any{
		"changed commit":      ticketArgs("9cd0221", "deploy-op-digest-1"),
		"changed environment": {"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "staging", "operation_id": "deploy-op-digest-1"},
		"changed service":     {"service": "orders-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu", "operation_id": "deploy-op-digest-1"},
	} {
		t.Run(name, func(t *testing.T) {
			res, isErr := call(t, r.deployer, release.ToolCreate, args)
			assert.True(t, isErr)
			assert.Equal(t, "IDEMPOTENCY_CONFLICT", res["code"])
		})
	}
	assert.Equal(t, 1, r.Release.Stats().CreateCalls, "nothing dispatched")
}

func TestDenialEval_provider_lookup_inconclusive_stop_unknown_outcome(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{
		Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}},
		Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchHide, Times: 100}},
	})
	opID := "deploy-op-hidden-1"
	_, _ = call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", opID))
	escalated := false
	for range 20 {
		res, isErr := r.approve(t, opID)
		require.True(t, isErr, "approve_rollout is refused while the outcome is unknown")
		assert.Equal(t, "PRECONDITION_FAILED", res["code"])
		p := r.packet(t, opID)
		require.NotEqual(t, "RETRYABLE", p["state"], "never retryable without authoritative evidence")
		if p["state"] == "ESCALATED" {
			escalated = true
			assert.Equal(t, "verification_inconclusive", p["outcome"])
			assert.Contains(t, p["escalation"], "intentgate-oncall", "handed to a named operator")
			break
		}
		assert.Equal(t, "UNKNOWN", p["state"])
		r.clock.Advance(2 * time.Minute)
		r.sweep(t)
	}
	assert.True(t, escalated, "escalated after the probe budget")
	res, isErr := r.approve(t, opID)
	assert.True(t, isErr, res)
	assert.Equal(t, 1, r.Release.Stats().CreateCalls)
}

func TestDenialEval_two_matching_resources_stop_and_raise_incident(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}})
	opID := "deploy-op-twins-01"
	_, _ = call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", opID))
	r.clock.Advance(time.Minute)
	r.sweep(t)
	p := r.packet(t, opID)
	assert.Equal(t, "ESCALATED", p["state"])
	assert.Equal(t, "incident_multiple_effects", p["outcome"])
	assert.EqualValues(t, 2, p["duplicate_resources"])
	res, isErr := r.approve(t, opID)
	assert.True(t, isErr)
	assert.Contains(t, res["message"], "multiple tickets")
	st := r.Release.Stats()
	assert.Equal(t, 2, st.TicketsCommitted, "nothing deleted")
	assert.Equal(t, 1, st.CreateCalls, "nothing re-sent")
}

func TestLaggingSearchInsideTheSettleWindowNeverCreatesTwice(t *testing.T) {
	r := newTicketRig(t)
	// The create commits but its response is lost, and the search index lags
	// far behind: zero matches prove nothing until the index covers the
	// dispatch, so the operation must stay UNKNOWN, never RETRYABLE.
	lag := int((10 * time.Minute).Milliseconds())
	r.setFaults(t, releaseapi.Faults{
		Create:      []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}},
		SearchLagMS: &lag,
	})
	opID := "deploy-op-lagged-1"
	_, _ = call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", opID))
	for range 4 {
		r.clock.Advance(30 * time.Second)
		r.sweep(t)
		p := r.packet(t, opID)
		assert.Equal(t, "UNKNOWN", p["state"])
		assert.Equal(t, "verification_inconclusive", p["outcome"])
	}
	assert.Equal(t, 1, r.Release.Stats().CreateCalls, "a zero-match answer inside the window never led to a second create")

	// Once the index catches up, the one ticket is found.
	r.setFaults(t, releaseapi.Faults{})
	r.clock.Advance(time.Minute)
	r.sweep(t)
	p := r.packet(t, opID)
	assert.Equal(t, "SUCCEEDED", p["state"])
	assert.Equal(t, 1, r.Release.Stats().CreateCalls)
	assert.Equal(t, 1, r.Release.Stats().TicketsCommitted)
}

func TestOperatorResolvesEscalatedTicketThenRolloutIsApproved(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}})
	opID := "deploy-op-resolve-1"
	created, _ := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", opID))
	r.clock.Advance(time.Minute)
	r.sweep(t)
	handle := created["ticket_handle"].(string)
	require.Equal(t, "ESCALATED", r.packet(t, opID)["state"])

	args := map[string]any{"handle": handle, "resolution": "SUCCEEDED", "evidence": "kept ticket-9001, cancelled ticket-9002 in the release queue", "resource_id": "ticket-9001"}
	res, isErr := call(t, r.deployer, packet.ToolResolveOperation, args)
	assert.True(t, isErr)
	assert.Equal(t, "FORBIDDEN", res["code"], "a deployer may not resolve")

	operator := connect(t, r.MCPURLs[0], r.token(t, "OPERATOR"), protocolOld)
	require.True(t, r.Release.RemoveTicket("ticket-9002"))
	settled, isErr := call(t, operator, packet.ToolResolveOperation, args)
	require.False(t, isErr, settled)
	assert.Equal(t, "SUCCEEDED", settled["state"])
	assert.Equal(t, "ticket-9001", settled["resource_id"])

	approval, isErr := r.approve(t, opID)
	require.False(t, isErr, approval)
	assert.Equal(t, "approved", approval["decision"])
	assert.Equal(t, "ticket-9001", approval["ticket_id"])
}

func TestDeployerNamingAnotherServiceIsForbiddenBeforeAnyEffect(t *testing.T) {
	r := newTicketRig(t)
	res, isErr := call(t, r.deployer, release.ToolCreate, map[string]any{"service": "search-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"})
	assert.True(t, isErr)
	assert.Equal(t, "FORBIDDEN", res["code"])
	alice := connect(t, r.MCPURLs[0], r.token(t, "ALICE"), protocolNew)
	res, isErr = call(t, alice, release.ToolCreate, map[string]any{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"})
	assert.True(t, isErr)
	assert.Equal(t, "FORBIDDEN", res["code"], "a support agent may not create tickets")
	st := r.Release.Stats()
	assert.Equal(t, 0, st.CreateCalls)
	assert.Equal(t, 0, st.MaxInFlight)
}

func TestParallelCallersOnTwoReplicasShareOneTicketRecord(t *testing.T) {
	clock := newTestClock()
	// The local engine applies one request at a time: eight concurrent
	// inserts (and the losers' bindings) queue behind each other, which a
	// store budget sized for DynamoDB's latency would turn into
	// TEMPORARY_UNAVAILABLE. This test is about sharing one record.
	h := startStackWith(t, 2, map[string]string{"INTENTGATE_BUDGET_STORE": "2s"}, stack.Config{Clock: clock.Now, ReleaseSearchLag: searchLag})
	tok := h.token(t, "DEPLOYER")
	const callers = 8
	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		sessions[i] = connect(t, h.MCPURLs[i%2], tok, protocolNew)
	}
	results := make([]map[string]any, callers)
	testsync.Race(callers, func(i int) {
		// Half reuse the first intent's key, half are "subagents" inventing their own.
		opID := "deploy-op-shared-1"
		if i%2 == 1 {
			opID = fmt.Sprintf("deploy-op-agent-%d", i)
		}
		results[i], _ = call(t, sessions[i], release.ToolCreate, ticketArgs("8bc911d", opID))
	})
	for _, res := range results {
		assert.Equal(t, results[0]["ticket_handle"], res["ticket_handle"], "one shared record")
	}
	st := h.Release.Stats()
	assert.Equal(t, 1, st.CreateCalls)
	assert.Equal(t, 1, st.TicketsCommitted)
}
