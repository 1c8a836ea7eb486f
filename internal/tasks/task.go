package tasks

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/operation"
)

// Extension is the extension identifier of MCP Tasks (SEP-2663).
const Extension = "io.modelcontextprotocol/tasks"

// Status is a task's status in the extension's vocabulary.
type Status string

// The statuses this server reports. input_required is never used: no tool
// here asks the client for input, and an operator's decision is not the
// client's to give. failed is reserved by the specification for JSON-RPC
// errors, which a recorded operation never ends in.
const (
	StatusWorking   Status = "working"
	StatusCompleted Status = "completed"
	StatusCancelled Status = "cancelled"
)

// Task is the extension's Task, with the status-specific result inlined
// (DetailedTask) when the task is completed.
type Task struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is null while the task is kept without limit (a SUCCEEDED
	// operation is never deleted); a FAILED one expires after retention.
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// CreateTaskResult answers a tools/call with a task handle
// (resultType "task").
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
}

// GetTaskResult answers tasks/get (resultType "complete").
type GetTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
}

// AckResult is the empty acknowledgement of tasks/cancel.
type AckResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// Timing is what the mapping needs to know about the server's clocks.
type Timing struct {
	Now time.Time
	// Retention is how long a FAILED operation is kept (its table TTL).
	Retention time.Duration
	// MinPoll and MaxPoll bound pollIntervalMs.
	MinPoll, MaxPoll time.Duration
}

// View maps an operation to its task. result is the CallToolResult the tool
// returns for the operation today; it is carried only once the task is
// completed. operator names who resolves escalations.
func View(op operation.Operation, taskID string, result *mcp.CallToolResult, operator string, tm Timing) (Task, error) {
	created, updated := op.CreatedAt, op.UpdatedAt
	if len(op.Journal) > 0 {
		created, updated = op.Journal[0].At, op.Journal[len(op.Journal)-1].At
	}
	t := Task{TaskID: taskID, CreatedAt: stamp(created), LastUpdatedAt: stamp(updated)}
	switch {
	case Final(op):
		t.Status = StatusCompleted
		if cancelled(op) {
			t.Status = StatusCancelled
			t.StatusMessage = "cancelled before it was sent; nothing was executed"
			if op.MayHaveReachedProvider() {
				t.StatusMessage = "cancelled after its request was proven absent at the provider; it is not sent again"
			}
		} else if op.State == operation.StateEscalated {
			t.StatusMessage = escalatedMessage(op, operator) + " (after it had settled: the result says why)"
		} else if op.State == operation.StateSucceeded {
			t.StatusMessage = "committed and verified"
			if op.AuditPending() {
				t.StatusMessage += "; a duplicate audit due at " + op.DueAt.UTC().Format(time.RFC3339) +
					" is still to show it is the only effect: do not start dependent actions until then"
			}
		} else {
			t.StatusMessage = "failed without effect"
		}
		closedIDs, openIDs := op.EffectsClosedAfterFailure(), op.EffectsReportedAfterFailure()
		if len(closedIDs)+len(openIDs) > 0 {
			// The terminal status stays; what it claimed no longer holds.
			t.StatusMessage = "recorded " + strings.TrimSuffix(strings.TrimSuffix(t.StatusMessage, "; nothing was executed"), " without effect")
		}
		if len(closedIDs) > 0 {
			t.StatusMessage += ", but the provider made an effect after all (" + strings.Join(closedIDs, ", ") + "), which an operator has since dealt with"
		}
		if len(openIDs) > 0 {
			t.StatusMessage += ", but the provider later reported an effect (" + strings.Join(openIDs, ", ") +
				"); an operator must look; do not ask for it again"
		}
		if op.WithdrawalAuditEscalated() && len(openIDs) == 0 {
			t.StatusMessage += "; whether the provider committed it after all could not be checked, and an operator is looking"
		}
		if op.State == operation.StateFailed && !op.AwaitsOperator() {
			ttl := updated.Add(tm.Retention).Sub(created).Milliseconds()
			t.TTLMs = &ttl
		}
		if t.Status == StatusCompleted {
			if result == nil {
				return Task{}, fmt.Errorf("tasks: completed task %s needs its tool result", taskID)
			}
			raw, err := completeResult(result)
			if err != nil {
				return Task{}, fmt.Errorf("tasks: encode result of %s: %w", taskID, err)
			}
			t.Result = raw
		}
		return t, nil
	}
	switch op.State {
	case operation.StatePending:
		t.StatusMessage = "PENDING: the request is being sent to the provider; the server is waiting for its answer"
	case operation.StateUnknown:
		t.StatusMessage = "UNKNOWN (" + string(op.Outcome) + "): the provider may have executed it; the server's reconciler is checking for the effect and will not send it twice"
	case operation.StateRetryable:
		t.StatusMessage = retryableMessage(op)
	case operation.StateEscalated:
		t.StatusMessage = escalatedMessage(op, operator)
	default:
		return Task{}, fmt.Errorf("tasks: operation %s in unknown state %q", op.Handle, op.State)
	}
	t.Status = StatusWorking
	t.PollIntervalMs = pollInterval(op, tm).Milliseconds()
	return t, nil
}

// completeResult encodes the tool's result as the tools/call answer it
// stands for: at 2026-07-28 every Result carries resultType, which go-sdk
// sets only on the wire of its own responses (the field is unexported).
func completeResult(result *mcp.CallToolResult) (json.RawMessage, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	fields["resultType"] = json.RawMessage(`"complete"`)
	return json.Marshal(fields)
}

// Final reports whether the operation's task is terminal (completed or
// cancelled): it is settled, or it settled once and was escalated after
// (the duplicate audit, a clock skew). A terminal task never returns to
// working; its result follows the operation (the tool's escalated answer,
// then the operator's resolution).
func Final(op operation.Operation) bool {
	if op.State.Settled() {
		return true
	}
	if op.State != operation.StateEscalated {
		return false
	}
	for _, ev := range op.Journal {
		if ev.To.Settled() {
			return true
		}
	}
	return false
}

// retryableMessage claims the proof and offers the cancel only where
// operation.EffectRuledOut holds, which is what tasks/cancel requires: an
// absence the provider may still overtake proves nothing.
func retryableMessage(op operation.Operation) string {
	if op.EffectRuledOut() {
		return "RETRYABLE: proven not executed; the server's reconciler will send it again (tasks/cancel withdraws it while it is unsent)"
	}
	if ids := op.EffectEvidence(); len(ids) > 0 {
		return "RETRYABLE: the provider reported an effect of this operation (" + strings.Join(ids, ", ") + "); " +
			"the server's reconciler reconciles it and never sends it twice"
	}
	return "RETRYABLE: not found at the provider, but an earlier request may still commit there (the provider promises no deadline); " +
		"the server's reconciler will retry it without making a second effect"
}

func escalatedMessage(op operation.Operation, operator string) string {
	who := operator
	if who == "" {
		who = "an operator"
	}
	return "ESCALATED: waiting for " + who + " to resolve it (" + op.Escalation + "); do not resend"
}

// cancelled reports whether the operation ended by tasks/cancel.
func cancelled(op operation.Operation) bool {
	if op.State != operation.StateFailed {
		return false
	}
	// The event that made it FAILED, not the last one: evidence may be
	// journalled on a FAILED operation afterwards.
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if ev := op.Journal[i]; ev.To == operation.StateFailed && ev.From != operation.StateFailed {
			return ev.Type == operation.EventClientCancelled
		}
	}
	return false
}

// pollInterval is what a client is told to wait between polls. It follows
// the reconciler (nextLook); past the due time the operation waits for a
// reconciler, the stream's at once or the next sweep's (a minute apart),
// so the interval backs off with the time overdue, within the same bounds:
// a client waiting for the sweep polls a few times, not every second.
func pollInterval(op operation.Operation, tm Timing) time.Duration {
	if overdue := tm.Now.Sub(op.DueAt); !op.DueAt.IsZero() && overdue > 0 && op.State != operation.StateEscalated {
		return min(max(overdue, tm.MinPoll), tm.MaxPoll)
	}
	return nextLook(op, tm)
}

// nextLook is when to read the operation again: the next moment anything
// can change is its due time (lease end, next probe, next retry), bounded
// so a reader neither spins nor sleeps past a change by much; overdue, the
// shortest wait. An escalation waits for a human: the longest. tasks/result
// waits this way within its one request, where a change must be seen
// before the request's budget ends.
func nextLook(op operation.Operation, tm Timing) time.Duration {
	if op.State == operation.StateEscalated || op.DueAt.IsZero() {
		return tm.MaxPoll
	}
	return min(max(op.DueAt.Sub(tm.Now), tm.MinPoll), tm.MaxPoll)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
