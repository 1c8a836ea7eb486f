package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// Config wires the task service.
type Config struct {
	Executor *tools.Executor
	// Tools render a completed task's result exactly as the tool answers
	// a replay of the same call.
	Tools []tools.Published
	IDs   IDs
	// Caller reads the trusted identity of a request (the same one tools get).
	Caller func(context.Context) (tools.Caller, bool)
	// Operator is named in the status of escalated tasks.
	Operator string
	// Retention is how long a FAILED operation is kept (its ttlMs).
	Retention time.Duration
	// MinPoll and MaxPoll bound pollIntervalMs. Defaults 1s and 30s.
	MinPoll, MaxPoll time.Duration
	// ResultWait bounds how long a 2025-11-25 tasks/result waits for a
	// working task (default 10s, inside the MCP function's timeout).
	ResultWait time.Duration
}

// Service answers the Tasks extension from the operation table.
type Service struct {
	cfg        Config
	tools      map[string]tools.Published
	visibility tools.Visibility
}

// New validates the configuration.
func New(cfg Config) (*Service, error) {
	if cfg.Executor == nil || cfg.Caller == nil || len(cfg.IDs.key) == 0 {
		return nil, errors.New("tasks: executor, caller and ids are required")
	}
	if cfg.Retention <= 0 {
		return nil, errors.New("tasks: retention must be positive")
	}
	if cfg.MinPoll == 0 {
		cfg.MinPoll = time.Second
	}
	if cfg.MaxPoll == 0 {
		cfg.MaxPoll = 30 * time.Second
	}
	if cfg.ResultWait == 0 {
		cfg.ResultWait = 10 * time.Second
	}
	if cfg.ResultWait < 0 {
		return nil, fmt.Errorf("tasks: result wait %s must be positive", cfg.ResultWait)
	}
	if cfg.MinPoll < 0 || cfg.MaxPoll < cfg.MinPoll {
		return nil, fmt.Errorf("tasks: poll interval bounds %s..%s must be positive and ordered", cfg.MinPoll, cfg.MaxPoll)
	}
	byName := make(map[string]tools.Published, len(cfg.Tools))
	families := make([]tools.WriteTool, 0, len(cfg.Tools))
	for _, t := range cfg.Tools {
		byName[t.Name()] = t
		families = append(families, t)
	}
	return &Service{cfg: cfg, tools: byName, visibility: tools.NewVisibility(families...)}, nil
}

// Supports reports whether tool's calls may be answered with a task.
func (s *Service) Supports(tool string) bool {
	_, ok := s.tools[tool]
	return ok
}

// errUnknownTask answers an id that does not exist and an id the caller
// may not see, identically (the specification's -32602). A new value each
// time: the SDK owns an error once it is returned.
func errUnknownTask() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

// errMissingCap is the specification's -32021 naming the extension.
func errMissingCap() error {
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability",
		Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + Extension + `":{}}}}`)}
}

// Get reads the task from the table: any instance answers for any task.
func (s *Service) Get(ctx context.Context, taskID string) (Task, error) {
	c, op, err := s.find(ctx, taskID)
	if err != nil {
		return Task{}, err
	}
	return s.view(c, op, taskID)
}

// Cancel withdraws an operation that can have no effect (RETRYABLE, not yet
// claimed, operation.EffectRuledOut) by a version-conditioned transition to
// FAILED: a reconciler claim that wins first makes the cancel stale and it
// is refused; a cancel that wins first leaves nothing to re-send. Anything
// the provider may still commit is refused, and so is a caller who may see
// the operation but does not own it (tools.Owns; operators excepted).
func (s *Service) Cancel(ctx context.Context, taskID string) error {
	c, op, err := s.find(ctx, taskID)
	if err != nil {
		return err
	}
	if err := mayWithdraw(c, op); err != nil {
		return err
	}
	if cancelled(op) {
		return nil
	}
	actor := c.UserID
	if actor == "" {
		actor = c.ClientID
	}
	// A stale write that leaves the operation RETRYABLE (evidence recorded
	// meanwhile) is tried again on the newer version; a few times at most.
	for attempt := 0; attempt < 3 && op.State == operation.StateRetryable && op.EffectRuledOut(); attempt++ {
		ev := operation.Event{Type: operation.EventClientCancelled, At: s.cfg.Executor.Now(), Source: "tasks/cancel", Actor: actor,
			Detail: "withdrawn by the client while proven unsent"}
		next, terr := s.cfg.Executor.Transition(ctx, op.Key.Tool, op, ev, nil)
		var stale *store.StaleError
		switch {
		case terr == nil:
			return nil
		case errors.As(terr, &stale):
			// Someone moved it first: a claim (now possibly in flight),
			// another cancel, or new evidence.
			if cancelled(next) {
				return nil
			}
			op = next
		default:
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the operation store is unavailable; nothing was cancelled; retry tasks/cancel"}
		}
	}
	return refuseCancel(op)
}

// mayWithdraw refuses a cancel by a caller who may see op but does not own
// it, whatever op's state: holding a task id that resolves to op (a
// deduplicated call's own) and seeing op through a grant is not
// owning it, and a team granted the same service must not withdraw another
// team's intent. Operators may.
func mayWithdraw(c tools.Caller, op operation.Operation) error {
	if c.HasRole(tools.RoleOperator) || tools.Owns(c, op.Owner()) {
		return nil
	}
	return refuseForeignCancel(op)
}

// refuseForeignCancel answers a cancel by a caller who may see op but does
// not own it.
func refuseForeignCancel(op operation.Operation) error {
	why := "only the end user who requested the operation, or an operator, may withdraw it; keep polling tasks/get"
	data, _ := json.Marshal(map[string]string{"state": string(op.State), "reason": why})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task cannot be cancelled: " + why, Data: data}
}

// refuseCancel explains why op cannot be withdrawn and what to do instead.
func refuseCancel(op operation.Operation) error {
	var why string
	switch op.State {
	case operation.StateSucceeded:
		why = "the operation already succeeded (committed and verified); its effect exists"
	case operation.StateFailed:
		why = "the operation already failed without effect; there is nothing to cancel"
	case operation.StateEscalated:
		why = "an effect may exist and an operator must resolve it; ask the operator, do not resend"
	case operation.StateRetryable:
		if ids := op.EffectEvidence(); len(ids) > 0 {
			why = "the provider reported an effect of this operation (" + strings.Join(ids, ", ") + "); " +
				"keep polling tasks/get: the server reconciles it and never sends it twice"
			break
		}
		why = "an earlier request of this operation may still commit at the provider, which promises no deadline for it; " +
			"withdrawing now could leave that effect and let the next request make another. " +
			"keep polling tasks/get: the server reconciles it and never sends it twice"
	default:
		why = "the request may already have reached the provider (" + string(op.State) + "), so an effect may exist; " +
			"keep polling tasks/get: the server reconciles it and never sends it twice"
	}
	data, _ := json.Marshal(map[string]string{"state": string(op.State), "reason": why})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task cannot be cancelled: " + why, Data: data}
}

// Update acknowledges an update of a task the caller may see and changes
// nothing. No tool here asks the client for input, so every key of
// inputResponses is one never issued, and the extension says "A server
// SHOULD ignore any inputResponses responses mapped to a key that is not
// currently outstanding for the task — including keys that were never
// issued" and "On success, the server MUST acknowledge the request with an
// empty result"; -32602 is reserved for an invalid or nonexistent taskId,
// which a client would read as the task being gone.
func (s *Service) Update(ctx context.Context, taskID string) error {
	_, _, err := s.find(ctx, taskID)
	return err
}

// Created is the CreateTaskResult for a call's submission that just
// became a task: the task of the caller's own key (TaskID). The operation
// is already durable (it was inserted before dispatch, and a deduplicated
// key's binding before the answer), so tasks/get resolves before this
// handle is returned.
func (s *Service) Created(ctx context.Context, sub tools.Submission) (*CreateTaskResult, error) {
	c, _ := s.cfg.Caller(ctx)
	t, err := s.view(c, sub.Operation, s.TaskID(sub))
	if err != nil {
		return nil, err
	}
	return &CreateTaskResult{ResultType: "task", Task: t}, nil
}

// TaskID is the task id of a call's submission: derived from the caller's
// own key's handle, which for a call deduplicated onto another key's
// operation is its binding's, so each key names its own task (the
// specifications want task ids unique per task) and its result is that
// call's replay. A binding's handle resolves to its holder wherever an
// operation is read, so nothing else changes; ids derived from the
// holder's handle, handed out to deduplicated callers before, still
// resolve (to the holder's own view).
func (s *Service) TaskID(sub tools.Submission) string {
	if sub.Key == (operation.RequestKey{}) {
		return s.cfg.IDs.For(sub.Operation.Handle)
	}
	return s.cfg.IDs.For(sub.Key.Handle())
}

// find reads the operation a task id names, if the caller may see it, by
// the same rule as get_operation (tools.Visibility over the same write
// families); every other case is errUnknownTask.
func (s *Service) find(ctx context.Context, taskID string) (tools.Caller, operation.Operation, error) {
	c, ok := s.cfg.Caller(ctx)
	if !ok {
		return c, operation.Operation{}, errUnknownTask()
	}
	handle, ok := s.cfg.IDs.Handle(taskID)
	if !ok {
		return c, operation.Operation{}, errUnknownTask()
	}
	op, err := s.cfg.Executor.Find(ctx, s.visibility, c, tools.Ref{Handle: handle})
	var f *tools.Failure
	switch {
	case err == nil:
	case errors.As(err, &f) && f.Code == tools.CodeNotFound:
		return c, operation.Operation{}, errUnknownTask()
	default:
		return c, operation.Operation{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the operation store is unavailable; retry shortly"}
	}
	if _, ok := s.tools[op.Key.Tool]; !ok {
		return c, operation.Operation{}, errUnknownTask()
	}
	return c, op, nil
}

func (s *Service) view(c tools.Caller, op operation.Operation, taskID string) (Task, error) {
	var result *mcp.CallToolResult
	if Final(op) {
		result = s.render(c, op, taskID)
	}
	t, err := View(op, taskID, result, s.cfg.Operator, s.timing())
	if err != nil {
		return Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be rendered"}
	}
	return t, nil
}

// render is the tool's result for op as a replay of the call taskID
// stands for: a task id whose handle is not op's is a key bound to op by
// deduplication (see TaskID), and its replay says it was deduplicated.
// It names no operation_id: the tool shows op's key only to a viewer in
// the key space that chose it (packet.OwnOperationID).
func (s *Service) render(c tools.Caller, op operation.Operation, taskID string) *mcp.CallToolResult {
	handle, _ := s.cfg.IDs.Handle(taskID)
	sub := tools.Submission{Operation: op, Replayed: true, Deduplicated: handle != op.Handle}
	r := s.tools[op.Key.Tool].Render(c, sub)
	return mcpserver.Result(r.Body, r.IsError)
}

func (s *Service) timing() Timing {
	return Timing{Now: s.cfg.Executor.Now(), Retention: s.cfg.Retention, MinPoll: s.cfg.MinPoll, MaxPoll: s.cfg.MaxPoll}
}
