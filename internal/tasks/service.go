package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/requestid"
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
	// working task (default 10s, inside the MCP function's timeout); the
	// request's own budget bounds it further.
	ResultWait time.Duration
	// Auditor records every tasks/cancel decision, withdrawn or not
	// (optional: no records without it).
	Auditor *obs.Auditor
	// Logger records the causes of failures a caller sees only as -32603
	// (optional).
	Logger *slog.Logger
}

// Service answers the Tasks extension from the operation table.
type Service struct {
	cfg        Config
	tools      map[string]tools.Published
	visibility tools.Visibility
}

// New validates the configuration.
func New(cfg Config) (*Service, error) {
	if cfg.Executor == nil || cfg.Caller == nil || len(cfg.IDs.keys) == 0 {
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
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

// Cancellation is what a tasks/cancel of a task the caller may see
// decided.
type Cancellation struct {
	// Withdrawn: the operation ended cancelled (by this request or an
	// earlier one); nothing of it will be sent.
	Withdrawn bool
	// State is the operation's state after the decision.
	State operation.State
	// Reason says why it was not withdrawn and what to do instead; empty
	// when Withdrawn.
	Reason string
}

// Cancel decides a cancel of the task: it withdraws an operation that can
// have no effect (RETRYABLE, not yet claimed, operation.EffectRuledOut)
// by a version-conditioned transition to FAILED, and leaves every other
// one as it is, saying why. A reconciler claim that wins first makes the
// cancel stale and it withdraws nothing; a cancel that wins first leaves
// nothing to re-send. Anything the provider may still commit is kept, and
// so is the operation of a caller who may see it but does not own it
// (tools.Owns; operators excepted). Not withdrawing is a decision, not an
// error: the error is for an unknown task and a store failure. Every
// decision is audited.
func (s *Service) Cancel(ctx context.Context, taskID string) (Cancellation, error) {
	c, op, err := s.find(ctx, taskID)
	if err != nil {
		return Cancellation{}, err
	}
	return s.decideCancel(ctx, c, op)
}

func (s *Service) decideCancel(ctx context.Context, c tools.Caller, op operation.Operation) (Cancellation, error) {
	if why, ok := mayWithdraw(c, op); !ok {
		return s.decided(ctx, c, op, Cancellation{State: op.State, Reason: why}), nil
	}
	if cancelled(op) {
		return s.decided(ctx, c, op, Cancellation{Withdrawn: true, State: op.State}), nil
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
		// The provider's promise is trusted, and checked: an audit past
		// the horizon and its grace looks for a late commit.
		var rec tools.Recovery
		if family, ok := s.tools[op.Key.Tool]; ok {
			rec = family.Recovery()
		}
		ev.NextAt = s.cfg.Executor.WithdrawalAuditAt(op, rec)
		next, terr := s.cfg.Executor.Transition(ctx, op.Key.Tool, op, ev, nil)
		var stale *store.StaleError
		switch {
		case terr == nil:
			return s.decided(ctx, c, next, Cancellation{Withdrawn: true, State: next.State}), nil
		case errors.Is(terr, store.ErrShared):
			// Another request for the same fact was answered with this
			// operation (the store counts them with the business key).
			return s.decided(ctx, c, op, Cancellation{State: op.State, Reason: sharedReason}), nil
		case errors.As(terr, &stale):
			// Someone moved it first: a claim (now possibly in flight),
			// another cancel, or new evidence.
			if cancelled(next) {
				return s.decided(ctx, c, next, Cancellation{Withdrawn: true, State: next.State}), nil
			}
			op = next
		case errors.Is(terr, store.ErrNotWritten) || errors.Is(terr, operation.ErrInvalid) ||
			errors.Is(terr, operation.ErrIllegalTransition) || errors.Is(terr, operation.ErrJournalFull):
			s.logFailure(ctx, "tasks/cancel: the withdrawal was not written", terr)
			return Cancellation{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the withdrawal could not be recorded; nothing was cancelled; retry tasks/cancel"}
		default:
			// The write was sent and its answer lost: it may have applied.
			s.logFailure(ctx, "tasks/cancel: the withdrawal's outcome is unknown", terr)
			return Cancellation{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the outcome of the cancel is unknown: the withdrawal may have been recorded; " +
					"tasks/get says cancelled if it was; retry tasks/cancel to learn it"}
		}
	}
	return s.decided(ctx, c, op, Cancellation{State: op.State, Reason: whyNotWithdrawn(op)}), nil
}

// mayWithdraw refuses a cancel by a caller who may see op but does not own
// it, whatever op's state, saying why: holding a task id that resolves to
// op (a deduplicated call's own) and seeing op through a grant is not
// owning it, and a team granted the same service must not withdraw another
// team's intent. Operators may.
func mayWithdraw(c tools.Caller, op operation.Operation) (why string, ok bool) {
	if c.HasRole(tools.RoleOperator) || tools.Owns(c, op.Owner()) {
		return "", true
	}
	return "only the end user who requested the operation, or an operator, may withdraw it; keep polling tasks/get", false
}

// sharedReason: the withdrawal was refused because another request for the
// same fact was answered with the operation (store.ErrShared).
const sharedReason = "another request for the same fact was answered with this operation and waits on it, " +
	"so it is not withdrawn on one caller's word; keep polling tasks/get: the server reconciles it and never sends it twice"

// whyNotWithdrawn explains why op cannot be withdrawn and what to do
// instead.
func whyNotWithdrawn(op operation.Operation) string {
	switch op.State {
	case operation.StateSucceeded:
		return "the operation already succeeded (committed and verified); its effect exists"
	case operation.StateFailed:
		if ids := op.EffectsReportedAfterFailure(); len(ids) > 0 {
			return "the operation was recorded failed, but the provider later reported an effect (" + strings.Join(ids, ", ") +
				"); an operator must look"
		}
		return "the operation already failed without effect; there is nothing to cancel"
	case operation.StateEscalated:
		return "an effect may exist and an operator must resolve it; ask the operator, do not resend"
	case operation.StateRetryable:
		if op.EffectRuledOut() {
			// Still withdrawable, but every write of the withdrawal met a
			// newer version (claims and evidence racing it).
			return "the operation kept changing while the withdrawal was written; retry tasks/cancel"
		}
		if ids := op.EffectEvidence(); len(ids) > 0 {
			return "the provider reported an effect of this operation (" + strings.Join(ids, ", ") + "); " +
				"keep polling tasks/get: the server reconciles it and never sends it twice"
		}
		return "an earlier request of this operation may still commit at the provider, which promises no deadline for it; " +
			"withdrawing now could leave that effect and let the next request make another. " +
			"keep polling tasks/get: the server reconciles it and never sends it twice"
	default:
		return "the request may already have reached the provider (" + string(op.State) + "), so an effect may exist; " +
			"keep polling tasks/get: the server reconciles it and never sends it twice"
	}
}

// refusalV1 is 2025-11-25's answer to a cancel not honoured: that
// revision's successful answer is the task, cancelled, so a cancel that
// withdraws nothing must be an error; -32602 with the state and the reason
// in data, as it refuses a terminal task.
func refusalV1(d Cancellation) error {
	data, _ := json.Marshal(map[string]string{"state": string(d.State), "reason": d.Reason})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task cannot be cancelled: " + d.Reason, Data: data}
}

// decided audits a cancel decision and returns it. A cancel that withdrew
// the operation also has its transition record; one that did not has only
// this, which says why.
func (s *Service) decided(ctx context.Context, c tools.Caller, op operation.Operation, d Cancellation) Cancellation {
	if s.cfg.Auditor == nil {
		return d
	}
	rec := obs.AuditRecord{Kind: obs.KindTaskCancel, RequestID: requestid.From(ctx).Request,
		OperationHash: obs.OperationHash(op.Key), Handle: op.Handle, BusinessKey: op.BusinessKey, Tool: op.Key.Tool,
		ClientPrincipal: c.ClientID, EndUserPrincipal: c.UserID, Tenant: c.TenantID,
		Status: string(d.State), Event: string(operation.EventClientCancelled), Actor: c.UserID,
		PolicyDecision: obs.PolicyAllow, Outcome: "withdrawn"}
	if !d.Withdrawn {
		// No event: the operation went on, and a search for withdrawals by
		// the journal's event name must not count it.
		rec.Event, rec.PolicyDecision, rec.Outcome, rec.Detail = "", obs.PolicyDeny, "not_withdrawn", d.Reason
	}
	s.cfg.Auditor.Record(ctx, rec)
	return d
}

// logFailure records the cause of a failure the caller sees only as
// -32603.
func (s *Service) logFailure(ctx context.Context, what string, err error) {
	var f *tools.Failure
	if errors.As(err, &f) && f.Cause != nil {
		err = f.Cause
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "tasks: "+what,
		slog.String("request_id", requestid.From(ctx).Request), slog.String("cause", err.Error()))
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
// call's replay; and from the creation time of the operation it resolves
// to, so that it names that operation only. A binding's handle resolves to
// its holder wherever an operation is read, so nothing else changes. A
// submission whose insert's outcome is unknown (no operation) gets an id
// that names none.
func (s *Service) TaskID(sub tools.Submission) string {
	if sub.Key == (operation.RequestKey{}) {
		return s.cfg.IDs.For(sub.Operation.Handle, sub.Operation.CreatedAt)
	}
	return s.cfg.IDs.For(sub.Key.Handle(), sub.Operation.CreatedAt)
}

// find reads the operation a task id names, if the caller may see it, by
// the same rule as get_operation (tools.Visibility over the same write
// families), and if it is the operation the id was minted for (an id whose
// operation expired does not name the next one under its handle); every
// other case is errUnknownTask. A forged id costs no read.
func (s *Service) find(ctx context.Context, taskID string) (tools.Caller, operation.Operation, error) {
	c, ok := s.cfg.Caller(ctx)
	if !ok {
		return c, operation.Operation{}, errUnknownTask()
	}
	ref, ok := s.cfg.IDs.Parse(taskID)
	if !ok {
		return c, operation.Operation{}, errUnknownTask()
	}
	op, err := s.lookup(ctx, c, ref.Handle)
	if err != nil {
		return c, operation.Operation{}, err
	}
	if !ref.Names(op) {
		return c, operation.Operation{}, errUnknownTask()
	}
	return c, op, nil
}

// lookup reads the operation handle resolves to, if c may see it and it is
// one of this service's tools'.
func (s *Service) lookup(ctx context.Context, c tools.Caller, handle string) (operation.Operation, error) {
	op, err := s.cfg.Executor.Find(ctx, s.visibility, c, tools.Ref{Handle: handle})
	var f *tools.Failure
	switch {
	case err == nil:
	case errors.As(err, &f) && f.Code == tools.CodeNotFound:
		return operation.Operation{}, errUnknownTask()
	default:
		s.logFailure(ctx, "the operation store could not be read", err)
		return operation.Operation{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the operation store is unavailable; retry shortly"}
	}
	if _, ok := s.tools[op.Key.Tool]; !ok {
		return operation.Operation{}, errUnknownTask()
	}
	return op, nil
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
	ref, _ := s.cfg.IDs.Parse(taskID)
	sub := tools.Submission{Operation: op, Replayed: true, Deduplicated: ref.Handle != op.Handle}
	r := s.tools[op.Key.Tool].Render(c, sub)
	return mcpserver.Result(r.Body, r.IsError)
}

func (s *Service) timing() Timing {
	return Timing{Now: s.cfg.Executor.Now(), Retention: s.cfg.Retention, MinPoll: s.cfg.MinPoll, MaxPoll: s.cfg.MaxPoll}
}
