package obs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/requestid"
)

// Audit record kinds.
const (
	KindToolCall   = "tool_call"
	KindTransition = "transition"
	KindReconcile  = "reconcile"
	KindAuthReject = "auth_reject"
	// KindTaskCancel is a tasks/cancel decision: the task's operation
	// withdrawn, or why not.
	KindTaskCancel = "task_cancel"
)

// Policy decisions as recorded.
const (
	PolicyAllow         = "allow"
	PolicyDeny          = "deny"
	PolicyNotApplicable = "n/a"
)

// AuditRecord is everything an operator needs to reconstruct a tool call or
// a transition: who, for whom, which tool and keys,
// why policy allowed it, what happened downstream and to the state.
//
// There is deliberately no field for a write's raw arguments, a caller's
// reason text or bearer tokens: the record carries an argument digest, so a
// log reader can match a call to a request without seeing its content. The
// one exception is an operator's resolution, whose evidence (at most 1,000
// characters, checked) and named resource are kept as Detail and
// ResourceID: why the decision was made.
type AuditRecord struct {
	Kind          string // KindToolCall, KindTransition, KindReconcile, KindAuthReject
	RequestID     string // per-request id (API Gateway / Lambda request id)
	OperationHash string // OperationHash of the request key; never the raw key
	// Handle is the operation's public handle, which get_operation takes:
	// derived from the key, it reveals no more than OperationHash does.
	Handle string
	// CallerOperationHash is the OperationHash of the key the caller sent,
	// written when it is not OperationHash: on a call answered from another
	// operation (Deduplicated; the key is now bound to it), or refused
	// about one (a conflict on a bound key), or refused before any
	// operation was known to exist under it (OperationHash empty).
	CallerOperationHash string
	BusinessKey         string // the invariant key, e.g. order+type+generation
	Tool                string // MCP tool name
	ClientPrincipal     string // which MCP client (token client_id / azp)
	EndUserPrincipal    string // on whose behalf (token sub)
	Tenant              string // the merchant or team the end user acts for (token); subs are not unique across tenants
	PolicyDecision      string // PolicyAllow, PolicyDeny, PolicyNotApplicable
	ArgumentDigest      string // request_digest (SHA-256 of canonical arguments)
	Status              string // operation status after the call/transition
	Outcome             string // outcome vocabulary shown to the caller
	FromState           string // transition source state
	ToState             string // transition target state
	Event               string // journal event that drove the transition
	// Actor is the actor of a transition's event: the resolving operator,
	// the escalation's owner (OperatorName) on the reconciler's, the
	// cancelling client on a task's; the principals above are the
	// operation's owner's on transition records.
	Actor string
	// ResourceID is the resource an operator's resolution names.
	ResourceID string
	// Detail is an operator resolution's evidence with the statements the
	// server appended, as journalled: why it was decided, kept in the audit
	// trail when the operation's item has expired.
	Detail            string
	DownstreamLatency time.Duration // provider call latency; written in ms
	ErrorClass        string        // failure classification (timeout, reset, 5xx, ...)
	ProbeCount        int           // reconciler probes so far
	ClaimResult       string        // reconciler CAS claim: won, lost, ...
	Code              string        // stable result code returned to the caller
	Deduplicated      bool          // answered from an existing operation
	Duration          time.Duration // whole call / step duration; written in ms
}

// Audit log keys. Stable: dashboards and queries depend on them.
const (
	keyKind              = "kind"
	keyRequestID         = "request_id"
	keyOperationHash     = "operation_hash"
	keyCallerOpHash      = "caller_operation_hash"
	keyHandle            = "handle"
	keyBusinessKey       = "business_key"
	keyTool              = "tool"
	keyClientPrincipal   = "client_principal"
	keyEndUserPrincipal  = "end_user_principal"
	keyTenant            = "tenant"
	keyPolicyDecision    = "policy_decision"
	keyArgumentDigest    = "argument_digest"
	keyStatus            = "status"
	keyOutcome           = "outcome"
	keyFromState         = "from_state"
	keyToState           = "to_state"
	keyEvent             = "event"
	keyActor             = "actor"
	keyResourceID        = "resource_id"
	keyDetail            = "detail"
	keyDownstreamLatency = "downstream_latency_ms"
	keyErrorClass        = "error_class"
	keyProbeCount        = "probe_count"
	keyClaimResult       = "claim_result"
	keyCode              = "code"
	keyDeduplicated      = "deduplicated"
	keyDuration          = "duration_ms"
)

// AuditMessage is the slog message of every audit record, so audit lines
// can be told apart from other log lines on the same stream.
const AuditMessage = "audit"

// Auditor writes audit records as JSON lines through log/slog.
type Auditor struct {
	logger *slog.Logger
}

// NewAuditor writes one JSON object per line to w (os.Stdout under Lambda).
// Each line carries slog's time, level and msg (AuditMessage) followed by
// NewAuditorFromHandler writes audit records through h, e.g. a JSON handler
// wrapped by [JoinKeys] so records carry the invocation's join keys. h must
// be enabled at Info: audit records are never filtered by a log level.
func NewAuditorFromHandler(h slog.Handler) *Auditor {
	return &Auditor{logger: slog.New(h)}
}

// the record's non-empty fields. A nil w discards.
func NewAuditor(w io.Writer) *Auditor {
	if w == nil {
		w = io.Discard
	}
	return &Auditor{logger: slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))}
}

// Logger is the underlying JSON logger, for callers that want ordinary log
// lines on the same stream.
func (a *Auditor) Logger() *slog.Logger {
	if a == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.logger
}

// Record writes r as one line. Empty fields are omitted; an empty
// RequestID is taken from ctx (internal/requestid). An OperationHash
// (or CallerOperationHash) not in HashID form is hashed (scope "") before
// writing, so a raw key passed by mistake never reaches the log.
func (a *Auditor) Record(ctx context.Context, r AuditRecord) {
	if a == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 25)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	ms := func(k string, d time.Duration) {
		if d != 0 {
			attrs = append(attrs, slog.Float64(k, float64(d)/float64(time.Millisecond)))
		}
	}
	hashed := func(h string) string {
		if h != "" && !isHashID(h) {
			return HashID("", h)
		}
		return h
	}
	if r.RequestID == "" {
		// Writers deep in the reconciler know no request; the front that
		// received it put its id in the context.
		r.RequestID = requestid.From(ctx).Request
	}
	opHash, callerHash := hashed(r.OperationHash), hashed(r.CallerOperationHash)
	if callerHash == opHash {
		callerHash = "" // the call's own operation: one key
	}

	str(keyKind, r.Kind)
	str(keyRequestID, r.RequestID)
	str(keyOperationHash, opHash)
	str(keyCallerOpHash, callerHash)
	str(keyHandle, r.Handle)
	str(keyBusinessKey, r.BusinessKey)
	str(keyTool, r.Tool)
	str(keyClientPrincipal, r.ClientPrincipal)
	str(keyEndUserPrincipal, r.EndUserPrincipal)
	str(keyTenant, r.Tenant)
	str(keyPolicyDecision, r.PolicyDecision)
	str(keyArgumentDigest, r.ArgumentDigest)
	str(keyStatus, r.Status)
	str(keyOutcome, r.Outcome)
	str(keyFromState, r.FromState)
	str(keyToState, r.ToState)
	str(keyEvent, r.Event)
	str(keyActor, r.Actor)
	str(keyResourceID, r.ResourceID)
	str(keyDetail, r.Detail)
	ms(keyDownstreamLatency, r.DownstreamLatency)
	str(keyErrorClass, r.ErrorClass)
	if r.ProbeCount != 0 {
		attrs = append(attrs, slog.Int(keyProbeCount, r.ProbeCount))
	}
	str(keyClaimResult, r.ClaimResult)
	str(keyCode, r.Code)
	if r.Deduplicated {
		attrs = append(attrs, slog.Bool(keyDeduplicated, true))
	}
	ms(keyDuration, r.Duration)

	a.logger.LogAttrs(ctx, slog.LevelInfo, AuditMessage, attrs...)
	annotate(ctx, r)
}

// hashIDPrefix marks values produced by HashID.
const hashIDPrefix = "h:"

// HashID returns "h:" + the first 16 hex digits of SHA-256(scope, 0x00, id).
// It lets an operator correlate records about one operation (hash the key a
// client reports and search for it) without the log revealing the caller's
// key. Scope is what the key is scoped by (for an operation_id: client
// principal, tenant, end user and tool, see OperationHash), so equal keys from
// different scopes do not correlate. This is
// pseudonymisation, not secrecy: someone who can guess a low-entropy key can
// confirm it; operation ids are expected to be random (UUIDs).
func HashID(scope, id string) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return hashIDPrefix + hex.EncodeToString(h.Sum(nil))[:16]
}

// OperationHash is the operation_hash of the audit records about the
// operation keyed by k: its operation_id hashed under its whole scope
// (client, tenant, end user and tool; operation.RequestKey.Scope), so two
// tenants, or two users of one, whose assistants share one client and one
// operation_id never correlate as one operation. Every record writer uses this, never its own scope.
func OperationHash(k operation.RequestKey) string {
	return HashID(k.Scope(), k.OperationID)
}

func isHashID(s string) bool {
	if len(s) != len(hashIDPrefix)+16 || s[:len(hashIDPrefix)] != hashIDPrefix {
		return false
	}
	for _, c := range s[len(hashIDPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// annotate puts the record's tool, state, outcome and code on the current
// X-Ray (sub)segment as annotations, so traces can be filtered by them.
// Untraced contexts (no span; the Lambda function segment takes no
// annotations) are left alone.
func annotate(ctx context.Context, r AuditRecord) {
	Annotate(ctx, map[string]string{"tool": r.Tool, "state": r.Status, "outcome": r.Outcome, "code": r.Code})
}
