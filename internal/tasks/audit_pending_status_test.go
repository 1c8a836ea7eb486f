package tasks_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
)

// A SUCCEEDED operation whose duplicate audit is still due is a completed
// task (SUCCEEDED is final but for that audit, and the result follows an
// incident it raises), whose message says the audit is due and dependent
// actions wait; the status view's next action is no "done".
func TestACompletedTaskWhoseAuditIsDueSaysDependentActionsWait(t *testing.T) {
	op := walk(t, operation.EventCreateSucceeded) // NextAt set: audit due
	require.True(t, op.AuditPending())
	task, err := tasks.View(op, "tsk_x", &mcp.CallToolResult{}, "release-oncall", timing)
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusCompleted, task.Status)
	assert.Contains(t, task.StatusMessage, "duplicate audit due at")
	assert.Contains(t, task.StatusMessage, "do not start dependent actions")

	v := tools.ViewOf(op, "get_operation", "operation_id")
	assert.NotContains(t, v.Next.Hint, "done", "ViewOf next action while the audit is due")
}
