package packet_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// owner is the client that chose the example operation's operation_id.
var owner = tools.Caller{ClientID: "claude-code", UserID: "dev-alice", TenantID: "team-payments", Roles: []string{"deployer"}}

// Timeline instants of a deployment ticket whose response was lost.
var (
	intentAt   = time.Date(2026, 8, 13, 10, 51, 4, 120_000_000, time.UTC)
	dispatchAt = time.Date(2026, 8, 13, 10, 51, 4, 203_000_000, time.UTC)
	timeoutAt  = time.Date(2026, 8, 13, 10, 51, 19, 219_000_000, time.UTC)
	probeAt    = time.Date(2026, 8, 13, 10, 52, 11, 0, time.UTC)
)

// exampleOp is a deployment-ticket operation after the client timeout.
func exampleOp(t *testing.T) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey("claude-code", "team-payments", "dev-alice", "create_deployment_ticket", "deploy-ticket-payments-8bc911d")
	require.NoError(t, err)
	target := map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"}
	digest, err := operation.RequestDigest(key.Tool, "dev-alice", target)
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "deployment_ticket|payments-api|8bc911d0a3c4e5f60718293a4b5c6d7e8f901234|production-eu",
		RequestDigest: digest, EndUserID: "dev-alice", TenantID: "team-payments", Target: target, Payload: target}, intentAt, 15*time.Second)
	require.NoError(t, err)
	op.Journal[1].At = dispatchAt // the example records the dispatch 83ms after the intent
	op, err = op.Apply(operation.Event{Type: operation.EventClientTimeout, At: timeoutAt, Detail: "deadline exceeded"})
	require.NoError(t, err)
	return op
}

func found(t *testing.T, op operation.Operation) operation.Operation {
	t.Helper()
	op, err := op.Apply(operation.Event{Type: operation.EventProbeFoundOne, At: probeAt, Source: "release_provider",
		Result: "one_exact_match", ResourceID: "ticket-9472", Receipt: "receipt-61b8",
		Detail: "search service=payments-api commit=8bc911d0a3c4e5f60718293a4b5c6d7e8f901234 environment=production-eu: one_exact_match"})
	require.NoError(t, err)
	return op
}

func outputSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal([]byte(packet.OutputSchema()), &s))
	require.Equal(t, "object", s.Type)
	r, err := s.Resolve(nil)
	require.NoError(t, err)
	return r
}

// marshal returns the packet as the caller sees it: generic JSON.
func marshal(t *testing.T, p packet.Packet) map[string]any {
	t.Helper()
	data, err := json.Marshal(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.NoError(t, outputSchema(t).Validate(m), "the packet must satisfy get_operation's outputSchema")
	return m
}

func TestSeedJournalBuildsTheSeedReviewPacket(t *testing.T) {
	op := found(t, exampleOp(t))
	m := marshal(t, packet.Build(op, owner))

	// external_write_review, field for field as docs/design.md (Review
	// packet) publishes it.
	for field, want := range map[string]any{
		"operation_id":        "deploy-ticket-payments-8bc911d",
		"tool":                "create_deployment_ticket",
		"outcome":             "committed_and_verified",
		"attempts":            float64(1),
		"client_timeouts":     float64(1),
		"resource_id":         "ticket-9472",
		"duplicate_resources": float64(0),
		"effect_receipt":      "receipt-61b8",
		"dependent_actions_blocked_while_unknown": true,
	} {
		assert.Equal(t, want, m[field], field)
	}
	assert.Equal(t, "SUCCEEDED", m["state"])
	assert.Equal(t, false, m["dependent_actions_blocked"])
	assert.Equal(t, false, m["retry_allowed"])
	assert.Equal(t, op.RequestDigest, m["request_digest"])
	assert.Equal(t, map[string]any{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"}, m["target"])
	assert.Nil(t, m["escalation"])

	timeline, ok := m["timeline"].([]any)
	require.True(t, ok)
	require.Len(t, timeline, 4)
	entry := func(i int) map[string]any { return timeline[i].(map[string]any) }
	assert.Equal(t, map[string]any{"at": "2026-08-13T10:51:04.12Z", "event": "intent_recorded", "journal_event": "intent_recorded",
		"to": "PENDING", "source": "gateway_journal"}, entry(0))
	assert.Equal(t, "provider_dispatch_started", entry(1)["event"])
	assert.Equal(t, "2026-08-13T10:51:04.203Z", entry(1)["at"])
	assert.Equal(t, map[string]any{"at": "2026-08-13T10:51:19.219Z", "event": "client_timeout", "journal_event": "client_timeout",
		"from": "PENDING", "to": "UNKNOWN", "detail": "deadline exceeded"}, entry(2),
		"a client timeout is a timeline entry, not the operation's final state")
	check := entry(3)
	assert.Equal(t, "reconciliation_check", check["event"])
	assert.Equal(t, "probe_found_one", check["journal_event"])
	assert.Equal(t, "release_provider", check["source"])
	assert.Equal(t, "one_exact_match", check["result"])
	assert.Equal(t, "ticket-9472", check["resource_id"])
	assert.Equal(t, "committed_and_verified", check["decision"])
	assert.Equal(t, "UNKNOWN", check["from"])
	assert.Equal(t, "SUCCEEDED", check["to"])
}

func TestUnknownPacketSaysSoAndBlocksDependents(t *testing.T) {
	op := exampleOp(t)
	p := packet.Build(op, owner)
	m := marshal(t, p)
	assert.Equal(t, "UNKNOWN", m["state"])
	assert.Equal(t, "dispatch_acknowledged_response_missing", m["outcome"])
	assert.Nil(t, m["resource_id"])
	assert.Nil(t, m["effect_receipt"])
	assert.Equal(t, true, m["dependent_actions_blocked"])
	assert.Equal(t, false, m["retry_allowed"])
	assert.Equal(t, packet.ToolGetOperation, p.NextAction.Tool)
	assert.Equal(t, map[string]string{"handle": op.Handle}, p.NextAction.Arguments)
	assert.Contains(t, p.NextAction.Hint, "do not send the write again")
}

func TestIncidentPacketNamesTheEscalationAndTheOperatorAction(t *testing.T) {
	op, err := exampleOp(t).Apply(operation.Event{Type: operation.EventProbeMultiple, At: probeAt, Source: "release_provider",
		Duplicates: 2, Detail: "search ...: multiple_exact_matches(2)"})
	require.NoError(t, err)
	p := packet.Build(op, owner)
	m := marshal(t, p)
	assert.Equal(t, "ESCALATED", m["state"])
	assert.Equal(t, "incident_multiple_effects", m["outcome"])
	assert.Equal(t, float64(2), m["duplicate_resources"])
	assert.Equal(t, "search ...: multiple_exact_matches(2)", m["escalation"])
	assert.Equal(t, true, m["dependent_actions_blocked"])
	assert.Equal(t, packet.ToolResolveOperation, p.NextAction.Tool)
	assert.Equal(t, map[string]string{"handle": op.Handle}, p.NextAction.Arguments)
	last := p.Timeline[len(p.Timeline)-1]
	assert.Equal(t, packet.EventReconciliationCheck, last.Event)
	assert.Equal(t, "multiple_matches", last.Result, "a probe without a recorded result gets the review packet's word for it")
	assert.Equal(t, "incident_multiple_effects", last.Decision)

	resolved, err := op.Apply(operation.Event{Type: operation.EventOperatorSucceeded, At: probeAt.Add(time.Hour), Actor: "op-olga",
		Source: "operator", Result: "resolved_succeeded", ResourceID: "ticket-9472", Receipt: "receipt-1", Detail: "kept ticket-9472"})
	require.NoError(t, err)
	rp := packet.Build(resolved, owner)
	marshal(t, rp)
	assert.False(t, rp.DependentActionsBlocked)
	assert.Equal(t, "kept ticket-9472", rp.Timeline[len(rp.Timeline)-1].Detail)
	assert.Equal(t, "operator", rp.Timeline[len(rp.Timeline)-1].Source)
}

func TestEveryStateHasANextActionThatNeverResendsTheWrite(t *testing.T) {
	op := exampleOp(t)
	for _, s := range operation.AllStates() {
		op.State = s
		next := packet.NextAction(op)
		assert.NotEmpty(t, next.Hint, s)
		assert.NotEqual(t, op.Key.Tool, next.Tool, "%s: the next action is never the write itself", s)
		assert.False(t, packet.Build(op, owner).RetryAllowed)
	}
}

func TestPacketHidesAnotherClientsOrTenantsOperationIDAndRequestDigest(t *testing.T) {
	op := exampleOp(t)
	for name, viewer := range map[string]tools.Caller{
		"tenant-mate on another client":   {ClientID: "cursor", UserID: "dev-bob", TenantID: "team-payments", Roles: []string{"deployer"}},
		"operator":                        {ClientID: "ops-console", UserID: "op-olga", TenantID: "sre", Roles: []string{"operator"}},
		"same user on another client":     {ClientID: "cursor", UserID: "dev-alice", TenantID: "team-payments"},
		"another team on the same client": {ClientID: "claude-code", UserID: "dev-sam", TenantID: "team-platform", Roles: []string{"deployer"}},
		"same user and client, no tenant": {ClientID: "claude-code", UserID: "dev-alice"},
	} {
		t.Run(name, func(t *testing.T) {
			p := packet.Build(op, viewer)
			m := marshal(t, p)
			assert.Nil(t, m["operation_id"], "another client's or tenant's operation_id is never shown")
			// The digest hashes the end user with the arguments, and the
			// packet shows the target: a viewer could test guessed users
			// against it and learn who asked.
			assert.Nil(t, m["request_digest"], "another key space's request digest is never shown")
			assert.NotContains(t, string(mustJSON(t, p)), op.RequestDigest)
			assert.Equal(t, op.Handle, m["handle"], "the handle is always shown")
			assert.Equal(t, map[string]string{"handle": op.Handle}, p.NextAction.Arguments,
				"the next action names the operation by handle, not by the hidden operation_id")
			data, err := json.Marshal(p)
			require.NoError(t, err)
			assert.NotContains(t, string(data), op.Key.OperationID)
		})
	}

	own := marshal(t, packet.Build(op, owner))
	assert.Equal(t, "deploy-ticket-payments-8bc911d", own["operation_id"])
	assert.Equal(t, op.RequestDigest, own["request_digest"], "the owner sees the digest its arguments made")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// An operation_id names one operation per write tool it was used with, so
// a next step that named the caller's own operation by it could lead to
// another write's operation, or to get_operation's refusal of the
// ambiguous id. The handle names exactly one.
func TestANextStepNamesItsOperationByHandle(t *testing.T) {
	op := exampleOp(t)
	for _, s := range operation.AllStates() {
		op.State = s
		p := packet.Build(op, owner)
		if p.NextAction.Tool == packet.ToolGetOperation {
			assert.Equal(t, map[string]string{"handle": op.Handle}, p.NextAction.Arguments, s)
		}
	}
	assert.Equal(t, map[string]string{"handle": op.Handle}, packet.ReadArgs(op))
}

// A stale dispatcher's evidence of a second ticket reaches an operation
// that was already SUCCEEDED (and approvable); the duplicate audit makes it
// the incident. The packet flags that an approval may already be out.
func TestIncidentAfterAnApprovableSuccessFlagsAPossibleApproval(t *testing.T) {
	op, err := exampleOp(t).Apply(operation.Event{Type: operation.EventProbeFoundOne, At: probeAt, ResourceID: "ticket-9472", Receipt: "r"})
	require.NoError(t, err)
	assert.False(t, packet.Build(op, owner).ApprovalMayHaveBeenGiven, "not an incident")
	op, err = op.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: probeAt.Add(time.Second), ResourceID: "ticket-9473", NextAt: probeAt.Add(time.Second)})
	require.NoError(t, err)
	assert.True(t, packet.Build(op, owner).DependentActionsBlocked, "the audit is due: approvals wait")
	op, err = op.Apply(operation.Event{Type: operation.EventAuditMultiple, At: probeAt.Add(2 * time.Second), Duplicates: 2, Detail: "incident"})
	require.NoError(t, err)

	m := marshal(t, packet.Build(op, owner))
	assert.Equal(t, "incident_multiple_effects", m["outcome"])
	assert.Equal(t, true, m["approval_may_have_been_given"])
	assert.Equal(t, true, m["dependent_actions_blocked"])
}

func TestIncidentFoundBeforeAnySuccessFlagsNoApproval(t *testing.T) {
	op, err := exampleOp(t).Apply(operation.Event{Type: operation.EventProbeMultiple, At: probeAt, Duplicates: 2})
	require.NoError(t, err)
	assert.Equal(t, false, marshal(t, packet.Build(op, owner))["approval_may_have_been_given"])
}

// A RETRYABLE operation is "proven absent" only where the effect is ruled
// out (operation.EffectRuledOut), as tasks/get says: an absence the
// provider may still overtake, or an effect a stale dispatcher reported,
// is not proof, and the packet must not claim it is.
func TestARetryablePacketClaimsProvenAbsenceOnlyWhereTheEffectIsRuledOut(t *testing.T) {
	unbounded, err := exampleOp(t).Apply(operation.Event{Type: operation.EventProbeNotFound, At: probeAt, Source: "risk_provider", Result: "not_found"})
	require.NoError(t, err)
	require.False(t, unbounded.EffectRuledOut())
	assert.NotContains(t, packet.NextAction(unbounded).Hint, "proven absent")
	assert.Contains(t, packet.NextAction(unbounded).Hint, "may still commit")

	withEvidence, err := unbounded.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: probeAt.Add(time.Second),
		Source: "stale_dispatcher", ResourceID: "ticket-9472"})
	require.NoError(t, err)
	assert.NotContains(t, packet.NextAction(withEvidence).Hint, "proven absent")
	assert.Contains(t, packet.NextAction(withEvidence).Hint, "ticket-9472")

	bounded, err := exampleOp(t).Apply(operation.Event{Type: operation.EventProbeNotFound, At: probeAt, Source: "release_provider",
		Result: "not_found", LateCommitsBounded: true})
	require.NoError(t, err)
	require.True(t, bounded.EffectRuledOut())
	assert.Contains(t, packet.NextAction(bounded).Hint, "proven absent")
}

// A withdrawal whose audit could not finish is an operator's to close:
// the packet says so and points at resolve_operation; closed, it is an
// ordinary failure again.
func TestAWithdrawalWhoseAuditCouldNotFinishPointsTheOperatorAtResolve(t *testing.T) {
	op := exampleOp(t)
	var err error
	for i, ev := range []operation.Event{
		{Type: operation.EventProbeNotFound, LateCommitsBounded: true},
		{Type: operation.EventClientCancelled, NextAt: probeAt.Add(time.Hour)},
		{Type: operation.EventAuditExhausted, Detail: "escalated to release-oncall: withdrawal audit could not complete after 8 searches"},
	} {
		ev.At = probeAt.Add(time.Duration(i) * time.Minute)
		op, err = op.Apply(ev)
		require.NoError(t, err)
	}

	next := packet.NextAction(op)
	assert.Equal(t, packet.ToolResolveOperation, next.Tool)
	assert.Contains(t, next.Hint, "could not finish")

	closed, err := op.Apply(operation.Event{Type: operation.EventOperatorFailed, At: probeAt.Add(time.Hour), Actor: "op-olga"})
	require.NoError(t, err)
	assert.Empty(t, packet.NextAction(closed).Tool)
}
