package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
)

// A task withdrawn while its operation was proven unsent, whose provider
// then reported an effect after all, was executed: once an operator closed
// that effect (removed it), the task's message says so, never "nothing was
// executed".
func TestACancelledTaskWhoseLaterEffectWasRemovedDoesNotSayNothingWasExecuted(t *testing.T) {
	op := journalled(t,
		operation.Event{Type: operation.EventNotDispatched},
		operation.Event{Type: operation.EventClientCancelled},
		operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "rv-000001"},
		operation.Event{Type: operation.EventOperatorFailed, Actor: "oscar"},
	)
	task, err := tasks.View(op, "task-1", &mcp.CallToolResult{}, "", tasks.Timing{Now: op.UpdatedAt.Add(time.Hour), Retention: time.Hour})
	require.NoError(t, err)
	t.Logf("status=%s message=%q ttl=%v", task.Status, task.StatusMessage, *task.TTLMs)
	assert.NotContains(t, task.StatusMessage, "nothing was executed", "rv-000001 was executed (and later removed)")
}

// Closed, then reported again: the message says each once.
func TestATaskReportedAgainAfterAClosingSaysEachOnce(t *testing.T) {
	op := journalled(t,
		operation.Event{Type: operation.EventBusinessRejected},
		operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "rv-000001"},
		operation.Event{Type: operation.EventOperatorFailed, Actor: "oscar"},
		operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "rv-000002"},
	)
	task, err := tasks.View(op, "task-1", &mcp.CallToolResult{}, "", tasks.Timing{Now: op.UpdatedAt.Add(time.Hour), Retention: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(task.StatusMessage, "recorded "), task.StatusMessage)
	assert.Contains(t, task.StatusMessage, "rv-000001")
	assert.Contains(t, task.StatusMessage, "rv-000002")
}

// journalled is an operation with events applied in order, a second apart.
func journalled(t *testing.T, events ...operation.Event) operation.Operation {
	t.Helper()
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	key, err := operation.NewRequestKey("c", "t", "u", "request_risk_review", "op-00000001")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "risk_review|O1|standard|g1", RequestDigest: "sha256:" + strings.Repeat("a", 64),
		TenantID: "t", EndUserID: "u", Target: map[string]string{"a": "b"}, Payload: map[string]string{"a": "b"}}, t0, time.Minute)
	require.NoError(t, err)
	for i, ev := range events {
		ev.At = t0.Add(time.Duration(i+1) * time.Second)
		op, err = op.Apply(ev)
		require.NoError(t, err, ev.Type)
	}
	return op
}
