package tasks_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
)

var t0 = time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)

func walk(t *testing.T, events ...operation.EventType) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey("client-a", "M1", "alice", "scripted_write", "op-00000001")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "scripted|f", RequestDigest: "sha256:" + strings.Repeat("0", 64),
		EndUserID: "alice", TenantID: "M1", Target: map[string]string{"fact": "f"}, Payload: map[string]string{"fact": "f"}}, t0, 5*time.Second)
	require.NoError(t, err)
	for i, ev := range events {
		e := operation.Event{Type: ev, At: t0.Add(time.Duration(i+1) * time.Second), NextAt: t0.Add(time.Duration(i+10) * time.Second)}
		if ev == operation.EventRetryClaimed {
			e.LeaseUntil = e.At.Add(5 * time.Second)
		}
		op, err = op.Apply(e)
		require.NoError(t, err)
	}
	return op
}

var timing = tasks.Timing{Now: t0.Add(2 * time.Second), Retention: time.Hour, MinPoll: time.Second, MaxPoll: 30 * time.Second}

func TestEveryStateMapsToATaskStatus(t *testing.T) {
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}
	cases := []struct {
		name    string
		op      operation.Operation
		status  tasks.Status
		message string
	}{
		{"pending", walk(t), tasks.StatusWorking, "PENDING"},
		{"unknown", walk(t, operation.EventClientTimeout), tasks.StatusWorking, "UNKNOWN (dispatch_acknowledged_response_missing)"},
		{"retryable", walk(t, operation.EventNotDispatched), tasks.StatusWorking, "RETRYABLE"},
		{"escalated", walk(t, operation.EventResponseMissing, operation.EventProbeBudgetExhausted), tasks.StatusWorking, "waiting for release-oncall"},
		{"succeeded", walk(t, operation.EventCreateSucceeded), tasks.StatusCompleted, "committed and verified"},
		{"failed", walk(t, operation.EventBusinessRejected), tasks.StatusCompleted, "failed without effect"},
		{"cancelled", walk(t, operation.EventNotDispatched, operation.EventClientCancelled), tasks.StatusCancelled, "cancelled before it was sent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task, err := tasks.View(tc.op, "tsk_x", result, "release-oncall", timing)
			require.NoError(t, err)
			assert.Equal(t, tc.status, task.Status)
			assert.Contains(t, task.StatusMessage, tc.message)
			assert.Equal(t, tc.status == tasks.StatusCompleted, task.Result != nil, "only a completed task carries the tool's result")
			assert.Equal(t, "2026-07-28T10:00:00Z", task.CreatedAt, "createdAt is the journal's first entry")
			assert.Equal(t, tc.op.Journal[len(tc.op.Journal)-1].At.Format(time.RFC3339Nano), task.LastUpdatedAt)
			assert.Equal(t, tc.status == tasks.StatusWorking, task.PollIntervalMs > 0)
			assert.Equal(t, tc.op.State == operation.StateFailed, task.TTLMs != nil, "only FAILED operations expire")
		})
	}
}

func TestCompletedTaskWithoutItsResultIsAnError(t *testing.T) {
	_, err := tasks.View(walk(t, operation.EventCreateSucceeded), "tsk_x", nil, "", timing)
	assert.Error(t, err)
}

func TestPollIntervalFollowsTheNextReconcilerStepWithinBounds(t *testing.T) {
	unknown := walk(t, operation.EventClientTimeout) // next probe at t0+10s
	task, err := tasks.View(unknown, "tsk_x", nil, "", timing)
	require.NoError(t, err)
	assert.Equal(t, int64(8000), task.PollIntervalMs, "due at t0+10s, now t0+2s")

	// Overdue, it waits for a reconciler: at once if the stream takes it,
	// else at the next sweep (a minute apart). The longer nothing came,
	// the longer the wait: polls back off with the time overdue, from the
	// minimum (never zero) to the maximum, instead of every second.
	for overdue, want := range map[time.Duration]int64{
		500 * time.Millisecond: 1000,
		4 * time.Second:        4000,
		20 * time.Second:       20000,
		time.Hour:              30000,
	} {
		late := timing
		late.Now = t0.Add(10*time.Second + overdue)
		task, err = tasks.View(unknown, "tsk_x", nil, "", late)
		require.NoError(t, err)
		assert.Equal(t, want, task.PollIntervalMs, "overdue by %s", overdue)
	}

	escalated := walk(t, operation.EventResponseMissing, operation.EventProbeBudgetExhausted)
	task, err = tasks.View(escalated, "tsk_x", nil, "", timing)
	require.NoError(t, err)
	assert.Equal(t, int64(30000), task.PollIntervalMs, "a human decides: the maximum")
}

func TestFailedTaskLivesForTheRetentionAfterItsLastUpdate(t *testing.T) {
	failed := walk(t, operation.EventBusinessRejected) // last update t0+1s
	task, err := tasks.View(failed, "tsk_x", &mcp.CallToolResult{IsError: true}, "", timing)
	require.NoError(t, err)
	require.NotNil(t, task.TTLMs)
	assert.Equal(t, (time.Hour + time.Second).Milliseconds(), *task.TTLMs)
	assert.Contains(t, string(task.Result), `"isError":true`)
}

// A completed task stays terminal: a SUCCEEDED operation the duplicate
// audit later escalates is still completed, its result now the tool's
// escalated answer, never back to working.
func TestCompletedTaskEscalatedByTheAuditStaysCompleted(t *testing.T) {
	op := walk(t, operation.EventCreateSucceeded, operation.EventAuditMultiple)
	require.Equal(t, operation.StateEscalated, op.State)
	assert.True(t, tasks.Final(op))
	task, err := tasks.View(op, "tsk_x", &mcp.CallToolResult{IsError: true}, "release-oncall", timing)
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusCompleted, task.Status)
	assert.Contains(t, task.StatusMessage, "release-oncall")
	assert.Contains(t, string(task.Result), `"isError":true`)
	assert.False(t, tasks.Final(walk(t, operation.EventResponseMissing, operation.EventProbeBudgetExhausted)),
		"an escalation before any settlement is still working")
}

// At 2026-07-28 every Result carries resultType; a completed task's result
// is the tools/call result, so it says "complete" like the call's own
// answer does (the ext-tasks client refuses it otherwise).
func TestCompletedTaskResultIsACompleteCallToolResult(t *testing.T) {
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: map[string]any{"status": "SUCCEEDED"}}
	task, err := tasks.View(walk(t, operation.EventCreateSucceeded), "tsk_x", result, "release-oncall", timing)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(task.Result, &got))
	assert.Equal(t, "complete", got["resultType"])
	assert.Equal(t, map[string]any{"status": "SUCCEEDED"}, got["structuredContent"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "{}"}}, got["content"])
}

// A RETRYABLE operation reached by an absence the provider may still
// overtake (probe_not_found without late_commits_bounded: the Risk API
// deduplicates by our key but promises no commit deadline) is not proven
// unexecuted, and tasks/cancel will not withdraw it
// (TestAnAbsenceTheProviderMayStillOvertakeCannotBeWithdrawn): its status
// message claims no such proof and offers no cancel. One that never left
// (operation.EffectRuledOut) says both.
func TestARetryableTaskThatMayStillCommitNeitherClaimsProofNorOffersCancel(t *testing.T) {
	op := walk(t, operation.EventResponseMissing, operation.EventProbeNotFound)
	require.Equal(t, operation.StateRetryable, op.State)
	require.False(t, op.EffectRuledOut(), "an earlier request may still commit")

	task, err := tasks.View(op, "tsk_x", nil, "", timing)
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusWorking, task.Status)
	assert.True(t, strings.HasPrefix(task.StatusMessage, "RETRYABLE"), task.StatusMessage)
	assert.NotContains(t, task.StatusMessage, "proven not executed")
	assert.NotContains(t, task.StatusMessage, "tasks/cancel")

	unsent := walk(t, operation.EventNotDispatched)
	require.True(t, unsent.EffectRuledOut())
	task, err = tasks.View(unsent, "tsk_y", nil, "", timing)
	require.NoError(t, err)
	assert.Contains(t, task.StatusMessage, "proven not executed")
	assert.Contains(t, task.StatusMessage, "tasks/cancel")
}

// A task withdrawn after its request was proven absent says so, not that
// it was never sent; and while the withdrawal's audit has ended for an
// operator, the task says an operator is looking and is kept.
func TestAWithdrawnTaskSaysWhatItsAuditLeftOpen(t *testing.T) {
	op := walk(t, operation.EventClientTimeout)
	var err error
	for i, ev := range []operation.Event{
		{Type: operation.EventProbeNotFound, LateCommitsBounded: true},
		{Type: operation.EventClientCancelled, NextAt: t0.Add(time.Minute)},
		{Type: operation.EventAuditExhausted},
	} {
		ev.At = t0.Add(time.Duration(i+2) * time.Second)
		op, err = op.Apply(ev)
		require.NoError(t, err)
		task, err := tasks.View(op, "tsk_x", nil, "release-oncall", timing)
		require.NoError(t, err)
		if ev.Type == operation.EventProbeNotFound {
			continue
		}
		assert.Equal(t, tasks.StatusCancelled, task.Status)
		assert.Contains(t, task.StatusMessage, "proven absent at the provider")
		if ev.Type == operation.EventAuditExhausted {
			assert.Contains(t, task.StatusMessage, "an operator is looking")
			assert.Nil(t, task.TTLMs, "kept until an operator closes it")
		} else {
			assert.NotContains(t, task.StatusMessage, "operator")
		}
	}
}
