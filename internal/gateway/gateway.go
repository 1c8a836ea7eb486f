package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
)

// Config wires the gateway.
type Config struct {
	Executor *tools.Executor
	// Writes are the write tools, served generically from their Spec,
	// each with its family's companion tools.
	Writes  []tools.Published
	Gate    *admission.Gate
	Auditor *obs.Auditor
	Metrics *obs.Metrics
	// Logger records the causes of failures the caller only sees as a code.
	Logger *slog.Logger
	// Tasks: write tools declare task support and, for a request that
	// opted in to the MCP Tasks extension, an outcome not final within the
	// call is answered with a task (internal/tasks).
	Tasks bool
}

// Gateway builds the MCP tools.
type Gateway struct {
	cfg Config
	// visibility is the one rule every tool's answer follows.
	visibility tools.Visibility
}

// New validates the configuration.
func New(cfg Config) (*Gateway, error) {
	if cfg.Executor == nil || len(cfg.Writes) == 0 || cfg.Gate == nil {
		return nil, errors.New("gateway: executor, at least one write tool and gate are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	families := make([]tools.WriteTool, 0, len(cfg.Writes))
	for _, w := range cfg.Writes {
		families = append(families, w)
	}
	return &Gateway{cfg: cfg, visibility: tools.NewVisibility(families...)}, nil
}

// writeTool serves a published write tool: the gate, the executor, the
// family's own rendering, one audit record.
func (g *Gateway) writeTool(w tools.Published) mcpserver.Tool {
	spec := w.Spec()
	var meta map[string]any
	if g.cfg.Tasks {
		meta = tasks.ToolMeta()
	}
	return mcpserver.Tool{
		Meta: meta,
		Name: w.Name(), Title: spec.Title, Description: spec.Description,
		// Its key is the operation_id argument, else the header (Executor.Submit).
		TakesIdempotencyKey: true,
		InputSchema:         json.RawMessage(spec.InputSchema), OutputSchema: json.RawMessage(spec.OutputSchema),
		// A write is idempotent by operation_id and creates, never destroys.
		Annotations: &mcp.ToolAnnotations{Title: spec.Title, DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(spec.OpenWorld)},
		Handler: g.serve(func(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
			sub, refused := g.submit(ctx, call, c, rec, w)
			if refused != nil {
				if g.cfg.Tasks && sub.MayExist {
					// The insert's answer was lost: the operation may exist
					// under the caller's key, so this is no refusal to a
					// request that asked for a task.
					tasks.Defer(ctx, sub)
				}
				return refused
			}
			if g.cfg.Tasks {
				// Answered with a task only if the request asked for one
				// (and the caller may see the operation, checked in submit); the
				// task is the operation, durable since its insert.
				tasks.Defer(ctx, sub)
			}
			r := w.Render(c, sub)
			if r.IsError {
				rec.Code = string(r.Code)
			}
			return mcpserver.Result(r.Body, r.IsError)
		}),
	}
}

// heldByInvisible answers a write whose target is already held by an
// operation the caller may not see (deduplicated onto it, or a key bound
// to it): nothing was sent, and nothing about that operation (handle,
// resource id, receipt, state) is shown.
func heldByInvisible() *tools.Failure {
	return tools.Fail(tools.CodePreconditionFailed, false, &tools.NextAction{
		Hint: "ask an operator; do not send it again"},
		"this target is already held by an operation you may not see; nothing was sent")
}

// callRecord collects what one call's audit record says.
type callRecord struct {
	obs.AuditRecord
	start time.Time
}

func (g *Gateway) begin(call mcpserver.Call) *callRecord {
	return &callRecord{AuditRecord: obs.AuditRecord{Kind: obs.KindToolCall, RequestID: call.RequestID, Tool: call.Tool,
		PolicyDecision: obs.PolicyNotApplicable}, start: time.Now()}
}

func (g *Gateway) finish(ctx context.Context, rec *callRecord) {
	rec.Duration = time.Since(rec.start)
	g.cfg.Auditor.Record(ctx, rec.AuditRecord)
	g.cfg.Metrics.ToolCall(ctx, rec.Tool)
	if rec.Code != "" {
		g.cfg.Metrics.ToolError(ctx, rec.Tool, rec.Code)
	}
}

// CallerFrom reads the trusted identity the auth middleware put in the
// context: the identity every tool and every task request is served for.
func CallerFrom(ctx context.Context) (tools.Caller, bool) { return caller(ctx) }

// caller reads the trusted identity the auth middleware put in the context.
func caller(ctx context.Context) (tools.Caller, bool) {
	s, ok := auth.SubjectFrom(ctx)
	if !ok {
		return tools.Caller{}, false
	}
	return tools.Caller{ClientID: s.ClientID, UserID: s.UserID, TenantID: s.MerchantID, Roles: s.Roles}, true
}

func (rec *callRecord) withOperation(op operation.Operation) {
	if op.Handle == "" {
		return
	}
	rec.OperationHash, rec.Handle = obs.OperationHash(op.Key), op.Handle
	rec.BusinessKey, rec.ArgumentDigest = op.BusinessKey, op.RequestDigest
	rec.Status, rec.Outcome = string(op.State), string(op.Outcome)
}

// failure renders a *tools.Failure (or an unexpected error) as a business
// error result and notes it in the audit record.
func (g *Gateway) failure(ctx context.Context, rec *callRecord, err error) *mcp.CallToolResult {
	var f *tools.Failure
	if !errors.As(err, &f) {
		f = tools.Fail(tools.CodeTemporaryUnavailable, true, nil, "internal error; retry with the same operation_id")
		f.Cause = err
		rec.ErrorClass = "internal"
	}
	if f.Cause != nil {
		g.cfg.Logger.LogAttrs(ctx, slog.LevelError, "tool call failed", slog.String("tool", rec.Tool),
			slog.String("request_id", rec.RequestID), slog.String("code", string(f.Code)), slog.String("cause", f.Cause.Error()))
	}
	rec.Code = string(f.Code)
	if f.Code == tools.CodeInvalidArgument && f.Next == nil {
		// As for a schema refusal (mcpserver): a refusal of the arguments
		// comes before anything is sent or recorded.
		f.Next = &tools.NextAction{Tool: rec.Tool, Hint: "nothing was sent or recorded; correct the arguments and call again"}
	}
	switch f.Code {
	case tools.CodeForbidden:
		rec.PolicyDecision = obs.PolicyDeny
	case tools.CodeIdempotencyConflict:
		rec.PolicyDecision = obs.PolicyAllow
	}
	return businessError(f.Code, f.Message, f.RetryAllowed, f.Next)
}

// businessError is the MCP error result of a business outcome.
func businessError(code tools.Code, message string, retryAllowed bool, next *tools.NextAction) *mcp.CallToolResult {
	return mcpserver.BusinessError(string(code), message, retryAllowed, (*mcpserver.NextAction)(next))
}

// errorCodes are the business codes this gateway's results carry, for the
// MCP server's error envelope (mcpserver.Config.ErrorCodes).
func errorCodes() []string {
	all := tools.AllCodes()
	codes := make([]string, len(all))
	for i, c := range all {
		codes[i] = string(c)
	}
	return codes
}

// toolHandler is a tool's own logic, given what every call shares.
type toolHandler func(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult

// serve wraps a tool's logic with what every call shares: one audit record
// per call, and the trusted caller (UNAUTHENTICATED without one).
func (g *Gateway) serve(fn toolHandler) func(context.Context, mcpserver.Call) *mcp.CallToolResult {
	return func(ctx context.Context, call mcpserver.Call) *mcp.CallToolResult {
		rec := g.begin(call)
		defer g.finish(ctx, rec)
		c, ok := caller(ctx)
		if !ok {
			rec.Code = string(tools.CodeUnauthenticated)
			return businessError(tools.CodeUnauthenticated, "authenticate first", false, nil)
		}
		rec.ClientPrincipal, rec.EndUserPrincipal, rec.Tenant = c.ClientID, c.UserID, c.TenantID
		return fn(ctx, call, c, rec)
	}
}

// submit runs a write call through the admission gate and the executor.
// A non-nil result is the caller's answer (overloaded, or a failure before
// anything was stored); otherwise the submission carries an operation.
func (g *Gateway) submit(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord, family tools.WriteTool) (tools.Submission, *mcp.CallToolResult) {
	done, overloaded := g.admit(ctx, rec)
	if overloaded != nil {
		return tools.Submission{}, overloaded
	}
	// Released when Submit returns, so a replay waiting for the first
	// attempt (below) uses no downstream capacity; deferred, because the
	// MCP server recovers a panic in a tool and keeps serving, and a slot
	// kept by one would be lost to this instance for good.
	sub, err := func() (tools.Submission, error) {
		defer done()
		// A key is bound only to a holder the caller may see: one it may
		// not see is refused below (heldByInvisible), and a refused key
		// stays free, so a retry once the fact is free again is sent.
		mayAnswerWith := store.BindOnlyTo(func(holder operation.Operation) bool { return g.visibility.CanSee(c, holder.Owner()) })
		return g.cfg.Executor.Submit(ctx, family, c, call.Arguments, call.IdempotencyKey, mayAnswerWith)
	}()
	if sub.Operation.Handle == "" {
		if sub.Key != (operation.RequestKey{}) {
			// Refused once the key was formed: the record names that key
			// and, for a conflict, the operation already under it. No
			// operation_hash otherwise: none is known to exist.
			rec.CallerOperationHash, rec.ArgumentDigest = obs.OperationHash(sub.Key), sub.Digest
			if sub.Refused != (operation.RequestKey{}) {
				rec.OperationHash, rec.Handle = obs.OperationHash(sub.Refused), sub.Refused.Handle()
			}
		}
		return sub, g.failure(ctx, rec, err)
	}
	// The key the caller sent: written when it is not the answering
	// operation's own (deduplicated, or bound that way), for the operator
	// who follows this caller's write by it.
	rec.CallerOperationHash = obs.OperationHash(sub.Key)
	// A fresh insert is the caller's own; an answer taken from an existing
	// operation shows it only to callers who may see it. Checked before any
	// wait for that operation, so the refusal's timing does not tell whether
	// the holder is still in flight.
	if (sub.Deduplicated || sub.Replayed) && !g.visibility.CanSee(c, sub.Operation.Owner()) {
		// The operator may join the refusal to its holder (by hash); the
		// holder's state and outcome are not this call's, and the digest is
		// the caller's own.
		rec.OperationHash, rec.Handle, rec.BusinessKey = obs.OperationHash(sub.Operation.Key), sub.Operation.Handle, sub.Operation.BusinessKey
		rec.ArgumentDigest, rec.Deduplicated, rec.PolicyDecision = sub.Digest, true, obs.PolicyAllow
		return sub, g.failure(ctx, rec, heldByInvisible())
	}
	sub = g.cfg.Executor.AwaitInFlight(ctx, sub)
	if sub.WaitReads > 0 {
		g.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "replay waited for the first attempt",
			slog.String("tool", rec.Tool), slog.String("request_id", rec.RequestID),
			slog.Int("store_reads", sub.WaitReads), slog.String("status", string(sub.Operation.State)))
	}
	// A failed state write after dispatch leaves the operation PENDING under
	// its lease; the caller still gets the handle and an honest status.
	rec.PolicyDecision = obs.PolicyAllow
	rec.withOperation(sub.Operation)
	rec.Deduplicated, rec.DownstreamLatency, rec.ErrorClass = sub.Deduplicated, sub.Latency, sub.ErrorClass
	if err != nil {
		// The outcome was recorded as far as it could be; the cause is ours.
		if rec.ErrorClass == "" {
			rec.ErrorClass = "store"
		}
		g.cfg.Logger.LogAttrs(ctx, slog.LevelError, "state write after dispatch failed; the lease will expire into UNKNOWN",
			slog.String("tool", rec.Tool), slog.String("request_id", rec.RequestID), slog.String("cause", err.Error()))
	}
	return sub, nil
}

// admit takes a slot of the admission gate for a write tool, or answers
// OVERLOADED at once with a retry hint: the downstream's safe capacity is
// the boundary, and a fast refusal beats a pile-up.
func (g *Gateway) admit(ctx context.Context, rec *callRecord) (func(), *mcp.CallToolResult) {
	release, err := g.cfg.Gate.Acquire(ctx)
	if err == nil {
		return release, nil
	}
	var over *admission.OverloadedError
	retryAfter := time.Second
	reason := "cancelled"
	if errors.As(err, &over) {
		retryAfter, reason = over.RetryAfter, over.Reason
	}
	g.cfg.Metrics.Overloaded(ctx, rec.Tool, reason)
	rec.Code, rec.ErrorClass = string(tools.CodeOverloaded), reason
	secs := int(retryAfter.Round(time.Second) / time.Second)
	return nil, businessError(tools.CodeOverloaded,
		fmt.Sprintf("server at capacity (%s); nothing was recorded or sent; retry the same call after %ds", reason, secs),
		true, &tools.NextAction{Hint: fmt.Sprintf("retry after %ds with the same operation_id", secs)})
}
