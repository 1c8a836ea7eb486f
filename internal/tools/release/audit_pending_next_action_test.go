package release_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A ticket a probe found is SUCCEEDED with its duplicate audit pending for
// the grace and a settle window. While it is, approve_rollout refuses and
// the packet says dependent_actions_blocked: true; its next_action (and
// the create's replay's) must not tell the agent to go ahead.
func TestATicketWhoseAuditIsPendingDoesNotInviteDependentActions(t *testing.T) {
	op := walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9475",
		Receipt: "receipt-9475", NextAt: t0.Add(time.Minute)})
	assert.True(t, op.AuditPending())
	_, err := approver.Approve(alice, op)
	assert.Error(t, err, "approve_rollout refuses")
	p := packet.Build(op, alice)
	assert.True(t, p.DependentActionsBlocked)
	assert.NotContains(t, p.NextAction.Hint, "dependent actions may proceed",
		"next_action contradicts dependent_actions_blocked and approve_rollout")
	res := release.NewResult(alice, tools.Submission{Operation: op})
	assert.NotContains(t, res.NextAction.Hint, "dependent actions may proceed", "the create's replay says the same")
}

// The status view (get_operation's and a task's message) says the same: a
// SUCCEEDED whose duplicate audit is due is not "done" for dependent
// actions.
func TestAStatusViewOfATicketWhoseAuditIsPendingSaysToWait(t *testing.T) {
	op := walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9476",
		Receipt: "receipt-9476", NextAt: t0.Add(time.Minute)})
	v := tools.ViewOf(op, packet.ToolGetOperation, "handle")
	assert.Contains(t, v.Message, "duplicate audit")
	require.NotNil(t, v.Next)
	assert.Equal(t, packet.ToolGetOperation, v.Next.Tool)
	assert.NotContains(t, v.Next.Hint, "done;")
	assert.Contains(t, v.Next.Hint, "do not start dependent actions")
}

// A create deduplicated onto that ticket is told where the ticket stands
// too: "follow that operation" alone leaves an agent to read a SUCCEEDED
// status as leave to start dependent actions while the audit is due.
func TestACreateDeduplicatedOntoATicketWhoseAuditIsPendingSaysToWait(t *testing.T) {
	op := walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9477",
		Receipt: "receipt-9477", NextAt: t0.Add(time.Minute)})

	res := release.NewResult(alice, tools.Submission{Operation: op, Deduplicated: true})

	assert.Equal(t, packet.ToolGetOperation, res.NextAction.Tool)
	assert.Contains(t, res.NextAction.Hint, "do not create another ticket")
	assert.Contains(t, res.NextAction.Hint, "do not start dependent actions")
}
