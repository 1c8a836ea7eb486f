package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// Caller is the trusted identity of a call, from the verified token, never
// from tool arguments.
type Caller struct {
	ClientID string // the MCP client principal
	UserID   string // the end-user principal
	TenantID string // merchant or team the end user acts for
	Roles    []string
}

// HasRole reports whether the caller holds role.
func (c Caller) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Prepared is a validated intent, before keys are derived.
type Prepared struct {
	OperationID string // from the arguments; empty when the caller sent none
	BusinessKey string
	Target      map[string]string // uniqueness fields, shown in the review packet
	Payload     map[string]string // what Dispatch needs to (re)send
	// DigestArgs are the canonical validated arguments the request digest
	// binds (everything but operation_id).
	DigestArgs any
}

// Effect is what a create reported.
type Effect struct {
	ResourceID string
}

// ProbeResult is what a lookup by request key or by intended effect found.
type ProbeResult struct {
	Matches []string // resource ids of effects matching this operation
	// Unnamed: the provider reports len(Matches) effects without naming
	// them, and Matches holds stand-ins, never resource ids (a broken
	// dedupe answered by count).
	Unnamed bool
	// Authoritative is true when zero matches proves absence (a consistent
	// lookup by key, or a search whose index covers the dispatch time and
	// hides nothing). Ignored when there are matches.
	Authoritative bool
	Source        string // e.g. risk_provider, release_provider
	Detail        string // why inconclusive, the query used, ...
	// LateCommitsBounded: an authoritative zero also covers every create
	// of this operation that could still commit late (the provider's
	// watermark is past the commit horizon it promised to honour, or the
	// provider deduplicates by our request key). Without it, proven
	// absence does not make a re-send safe.
	LateCommitsBounded bool
	// ReadyIn, for a non-authoritative answer, is how far the provider's
	// index still lags behind what an authoritative answer needs (by the
	// provider's own clock); zero when unknown. The next probe waits at
	// least this long instead of spending the probe budget.
	ReadyIn time.Duration
	// ProviderTime is the provider's clock when it answered, if it said:
	// the reconciler bounds the skew against its own clock with it.
	ProviderTime time.Time
	// IndexedThrough is the provider's search watermark (its clock) for an
	// answer from a search that hides nothing: every effect committed by
	// then is in it. Zero when the answer is not a search, or is
	// incomplete. The duplicate audit needs it past the commit horizon
	// plus its grace (Executor.AuditCoverage).
	IndexedThrough time.Time
}

// Recovery is a family's reconciliation policy.
type Recovery struct {
	// SettleWindow after the last dispatch during which a zero-match
	// answer proves nothing (provider's replication or index lag).
	SettleWindow time.Duration
	ProbeBudget  int           // probes per dispatch before an operator is called
	MaxAge       time.Duration // age of an UNKNOWN operation before escalation
	RetryBudget  int           // claimed re-sends, even for idempotent providers
	// IdempotentCreate: the provider dedupes creates by our request key.
	IdempotentCreate bool
	// CommitDeadline: the provider honours a commit deadline sent with each
	// create (never commits after it, by its own clock). A provider with
	// neither this nor IdempotentCreate is never sent a create twice: an
	// operation whose absence is proven escalates instead.
	CommitDeadline bool
}

// WriteTool is what a write tool family implements. Errors returned by
// Prepare and Authorize should be *Failure; Dispatch and Verify errors are
// classified by the provider package's classes.
type WriteTool interface {
	Name() string
	// Prepare decodes and domain-validates arguments already checked
	// against the input schema.
	Prepare(ctx context.Context, caller Caller, args json.RawMessage) (Prepared, error)
	// Authorize decides object-level access: may this end user act on this
	// object? Nothing is stored before it says yes.
	Authorize(ctx context.Context, caller Caller, p Prepared) error
	// Dispatch sends the create, with op.Handle as the request key.
	Dispatch(ctx context.Context, op operation.Operation) (Effect, error)
	// Verify confirms a reported effect by an authoritative read. Families
	// whose create answer is itself authoritative return nil.
	Verify(ctx context.Context, op operation.Operation, e Effect) error
	// Probe looks the effect up by request key or by intended effect.
	Probe(ctx context.Context, op operation.Operation) (ProbeResult, error)
	Recovery() Recovery
}
