package tasks

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// 2025-11-25 ends a tool call whose result is an error in "failed", and a
// terminal status never changes: the status follows how the operation
// first settled, whatever happens to it after.
func TestOlderRevisionsStatusFollowsHowTheOperationFirstSettled(t *testing.T) {
	t0 := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	walk := func(events ...operation.EventType) operation.Operation {
		key, err := operation.NewRequestKey("client-a", "M1", "alice", "scripted_write", "op-00000001")
		require.NoError(t, err)
		op, err := operation.New(operation.Intent{Key: key, BusinessKey: "scripted|f", RequestDigest: "sha256:" + strings.Repeat("0", 64),
			EndUserID: "alice", TenantID: "M1", Target: map[string]string{"fact": "f"}, Payload: map[string]string{"fact": "f"}}, t0, 5*time.Second)
		require.NoError(t, err)
		for i, ev := range events {
			op, err = op.Apply(operation.Event{Type: ev, At: t0.Add(time.Duration(i+1) * time.Second), NextAt: t0.Add(time.Duration(i+10) * time.Second)})
			require.NoError(t, err)
		}
		return op
	}
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}
	tm := Timing{Now: t0.Add(2 * time.Second), Retention: time.Hour, MinPoll: time.Second, MaxPoll: 30 * time.Second}
	for name, tc := range map[string]struct {
		op   operation.Operation
		want string
	}{
		"unknown":                        {walk(operation.EventClientTimeout), "working"},
		"succeeded":                      {walk(operation.EventCreateSucceeded), "completed"},
		"failed":                         {walk(operation.EventBusinessRejected), "failed"},
		"cancelled":                      {walk(operation.EventNotDispatched, operation.EventClientCancelled), "cancelled"},
		"escalated while still unknown":  {walk(operation.EventResponseMissing, operation.EventProbeBudgetExhausted), "working"},
		"escalated after it had settled": {walk(operation.EventCreateSucceeded, operation.EventAuditMultiple), "completed"},
	} {
		t.Run(name, func(t *testing.T) {
			task, err := View(tc.op, "tsk_x", result, "release-oncall", tm)
			require.NoError(t, err)
			v := viewV1(task, tc.op)
			assert.Equal(t, tc.want, v.Status)
			assert.Equal(t, task.TTLMs, v.TTL)
			assert.Equal(t, task.PollIntervalMs, v.PollInterval)
		})
	}
}

// A cancel that could withdraw its operation but lost every write to a
// newer version says so, not that the provider may still commit: that
// would be false for an operation proven unsent.
func TestACancelThatKeptLosingToNewerVersionsSaysToRetry(t *testing.T) {
	t0 := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	key, err := operation.NewRequestKey("client-a", "M1", "alice", "scripted_write", "op-00000001")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: "scripted|f", RequestDigest: "sha256:" + strings.Repeat("0", 64),
		EndUserID: "alice", TenantID: "M1", Target: map[string]string{"fact": "f"}, Payload: map[string]string{"fact": "f"}}, t0, 5*time.Second)
	require.NoError(t, err)
	unsent, err := op.Apply(operation.Event{Type: operation.EventNotDispatched, At: t0.Add(time.Second), NextAt: t0.Add(10 * time.Second)})
	require.NoError(t, err)
	require.True(t, unsent.EffectRuledOut())
	why := whyNotWithdrawn(unsent)
	assert.Contains(t, why, "retry tasks/cancel")
	assert.NotContains(t, why, "may still commit")
}
