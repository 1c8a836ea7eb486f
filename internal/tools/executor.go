package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/store"
)

// ExecutorConfig configures the shared write path.
type ExecutorConfig struct {
	Store  *store.Store
	Budget admission.BudgetConfig
	// LeaseMargin is added to the downstream and store budgets to form the
	// PENDING lease: past it, the dispatcher is presumed dead and the
	// reconciler moves the operation to UNKNOWN.
	LeaseMargin time.Duration
	// NotDispatchedDelay is how long a proven-unsent operation waits
	// before the reconciler may claim and send it.
	NotDispatchedDelay time.Duration
	Clock              func() time.Time
	// ReplayPollFirst and ReplayPollMax pace a replay's wait for an
	// in-flight first attempt: the first store read after ReplayPollFirst,
	// each next one after twice the last pause, at most ReplayPollMax.
	// Defaults 25ms and 200ms.
	ReplayPollFirst, ReplayPollMax time.Duration
	// ClockSkewBound is the most two actors' clocks (this dispatcher, the
	// reconcilers, the providers) may disagree. A commit deadline sent to a
	// provider is the lease end plus this bound, and no decision compares
	// timestamps from two clocks without allowing for it. Zero means every
	// actor reads one clock (tests with a single test clock); the
	// service's default comes from its configuration.
	ClockSkewBound time.Duration
	// Observe, if set, is told about every transition the executor makes.
	Observe func(ctx context.Context, t TransitionReport)
}

// TransitionReport describes one transition, for audit and metrics.
type TransitionReport struct {
	Tool              string
	From, To          operation.Operation
	Event             operation.Event
	DownstreamLatency time.Duration
	ErrorClass        string
}

// Executor runs the write path every tool shares.
type Executor struct {
	cfg ExecutorConfig
}

// NewExecutor validates the configuration.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if cfg.Store == nil {
		return nil, errors.New("executor: store is required")
	}
	if err := cfg.Budget.Validate(); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if cfg.LeaseMargin == 0 {
		cfg.LeaseMargin = DefaultLeaseMargin
	}
	if cfg.NotDispatchedDelay == 0 {
		cfg.NotDispatchedDelay = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ReplayPollFirst == 0 {
		cfg.ReplayPollFirst = 25 * time.Millisecond
	}
	if cfg.ReplayPollMax == 0 {
		cfg.ReplayPollMax = 200 * time.Millisecond
	}
	if cfg.ReplayPollFirst < 0 || cfg.ReplayPollMax < cfg.ReplayPollFirst {
		return nil, fmt.Errorf("executor: replay poll pauses %s..%s must be positive and ordered", cfg.ReplayPollFirst, cfg.ReplayPollMax)
	}
	if cfg.ClockSkewBound < 0 {
		return nil, fmt.Errorf("executor: clock skew bound must not be negative, got %s", cfg.ClockSkewBound)
	}
	return &Executor{cfg: cfg}, nil
}

// ClockSkewBound is the configured bound on disagreement between clocks.
func (e *Executor) ClockSkewBound() time.Duration { return e.cfg.ClockSkewBound }

// CommitDeadline is the deadline a dispatch granted with a lease ending at
// leaseUntil sends to the provider: the lease end by the granting clock,
// plus the skew bound, because the provider judges it by its own clock.
func (e *Executor) CommitDeadline(leaseUntil time.Time) time.Time {
	return leaseUntil.Add(e.cfg.ClockSkewBound)
}

// DefaultLeaseMargin is ExecutorConfig.LeaseMargin when unset.
const DefaultLeaseMargin = 2 * time.Second

// Lease is how long a dispatcher holds a PENDING operation.
func (e *Executor) Lease() time.Duration {
	return LeaseFor(e.cfg.Budget, e.cfg.LeaseMargin)
}

// LeaseFor is the PENDING lease of a dispatcher with budget b and margin:
// the downstream call and a store write either side of it.
func LeaseFor(b admission.BudgetConfig, margin time.Duration) time.Duration {
	return b.Downstream + 2*b.Store + margin
}

// AuditGraceFor is the duplicate audit's grace (Executor.AuditGrace) of a
// dispatcher with lease and clock skew bound.
func AuditGraceFor(lease, skewBound time.Duration) time.Duration {
	return lease + skewBound
}

// Budget is the deadline budget every call and dispatch runs under.
func (e *Executor) Budget() admission.BudgetConfig { return e.cfg.Budget }

// SettledAt is when a zero-match lookup for op can first prove absence: the
// settle window counted from the latest moment our wait for the last
// dispatch can have ended (its start plus the downstream budget), not from
// when it started, since a provider may commit after we gave up.
func (e *Executor) SettledAt(op operation.Operation, settle time.Duration) time.Time {
	return op.LastDispatchAt.Add(e.cfg.Budget.Downstream + settle)
}

// ClaimNeeds is the time a claimed re-send needs: the fence read, the
// dispatch, two store writes and the reserve. A claim with less left would
// burn a retry.
func (e *Executor) ClaimNeeds() time.Duration {
	b := e.cfg.Budget
	return b.Reserve + b.Downstream + 3*b.Store
}

// Now is the executor's clock.
func (e *Executor) Now() time.Time { return e.cfg.Clock() }

// Store is the operation store.
func (e *Executor) Store() *store.Store { return e.cfg.Store }

// Submission is what a write call produced.
type Submission struct {
	Operation operation.Operation
	// Deduplicated: another live operation already holds this business
	// fact; Operation is that one, nothing was sent.
	Deduplicated bool
	// Replayed: this request key was seen before with the same digest.
	// With Deduplicated it is a key first answered by deduplication and
	// answered the same way again.
	Replayed bool
	// WaitReads is how many store reads AwaitInFlight made waiting for
	// the first attempt's outcome.
	WaitReads int
	// OperationID is the caller's key (minted by the server when absent),
	// Key the request key it makes: Operation's own, unless Deduplicated.
	// Both come back with a refusal too once the key is formed.
	OperationID string
	Key         operation.RequestKey
	// Refused is, on an IDEMPOTENCY_CONFLICT, the key of the operation
	// already under Key (Key itself, or the holder Key is bound to).
	Refused operation.RequestKey
	// MayExist, with a failure: the insert under Key was sent and no
	// outcome came back, so an operation (which the reconciler will then
	// send) or a binding to a holder may exist under Key. The caller must
	// not be told that nothing was recorded.
	MayExist bool
	// AttemptedAt, with MayExist from a lost insert: the creation time of
	// the operation that insert would have recorded, fixed before it was
	// sent, so the operation can be named (a task id) before anyone knows
	// whether it exists. Zero when the insert was never sent.
	AttemptedAt time.Time
	Digest      string
	Latency     time.Duration
	ErrorClass  string
}

// Submit runs one write call: domain validation, authorization, keys,
// durable intent, dispatch, classification. headerKey is the
// Idempotency-Key header, if any; opts are the insert's (the gateway binds
// a key only to a holder the caller may see: store.BindOnlyTo). A *Failure
// is a business outcome; any other error is a fault of this server.
func (e *Executor) Submit(ctx context.Context, tool WriteTool, caller Caller, args json.RawMessage, headerKey string, opts ...store.InsertOption) (Submission, error) {
	p, err := tool.Prepare(ctx, caller, args)
	if err != nil {
		return Submission{}, err
	}
	opID, err := chooseOperationID(p.OperationID, headerKey)
	if err != nil {
		return Submission{}, err
	}
	key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, tool.Name(), opID)
	if err != nil {
		return Submission{}, Fail(CodeInvalidArgument, false, nil, "%v", err)
	}
	digest, err := operation.RequestDigest(tool.Name(), caller.UserID, p.DigestArgs)
	if err != nil {
		return Submission{}, fmt.Errorf("submit: %w", err)
	}
	actx, cancel := e.cfg.Budget.AuthContext(ctx)
	err = tool.Authorize(actx, caller, p)
	cancel()
	if err != nil {
		return e.refusedAuthorization(ctx, opID, key, digest, err)
	}
	// From here a refusal is about this key (and maybe the operation under
	// it): it comes back with the key, for the audit record.
	keyed := Submission{OperationID: opID, Key: key, Digest: digest}
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: p.BusinessKey, RequestDigest: digest,
		EndUserID: caller.UserID, TenantID: caller.TenantID, Target: p.Target, Payload: p.Payload,
	}, e.cfg.Clock(), e.Lease())
	if err != nil {
		return keyed, Fail(CodeInvalidArgument, false, nil, "%v", err)
	}
	op = op.WithCommitDeadline(e.CommitDeadline(op.DueAt))

	if e.cfg.Budget.Remaining(ctx) <= 0 {
		// Out of time before the insert was even sent: provably nothing
		// recorded, nothing sent.
		return keyed, Fail(CodeTemporaryUnavailable, true, nil,
			"no time left to record the operation; nothing was recorded or sent; retry with the same operation_id")
	}
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	res, err := e.cfg.Store.InsertIfAbsent(sctx, op, opts...)
	cancel()
	if err != nil {
		f, mayExist := insertFailure(opID, err)
		keyed.MayExist = mayExist
		if mayExist {
			keyed.AttemptedAt = op.CreatedAt
		}
		return keyed, f
	}
	sub := keyed
	sub.Operation = res.Operation
	switch res.Kind {
	case store.Replay:
		sub.Replayed, sub.Deduplicated = true, res.Bound
		return sub, nil
	case store.BusinessKeyHeld:
		// The key is now bound to this holder (store.bind). What of the
		// holder a deduplicated caller may see is the visibility rule's
		// decision (access.go), applied where the answer is rendered.
		sub.Deduplicated = true
		return sub, nil
	case store.Conflict:
		f := Fail(CodeIdempotencyConflict, false, nil,
			"operation_id %q was already used with different arguments; nothing was sent. Use a new operation_id for a new intent, or resend the original arguments", opID)
		f.Handle = res.Operation.Handle
		keyed.Refused = res.Operation.Key
		return keyed, f
	}
	next, rep, err := e.Dispatch(ctx, tool, res.Operation)
	sub.Operation, sub.Latency, sub.ErrorClass = next, rep.DownstreamLatency, rep.ErrorClass
	// A failed state write leaves the operation PENDING under its lease;
	// the reconciler takes it from there. The caller still gets the handle.
	return sub, err
}

// ErrorClassAuthorizationRefused is the error class of a replay answered
// from the record although its authorization refused now.
const ErrorClassAuthorizationRefused = "authorization_refused"

// refusedAuthorization answers a request whose authorization failed now
// (the provider that says who owns the object is down, or a grant
// changed). Authorization gates new writes; a replay of an operation
// already recorded under the key exists and was, or is being, sent, so it
// is answered as the replay it is: refusing it would tell the caller
// "nothing was sent" about an operation that may have committed. Who may
// see the answer is the visibility rule's decision, applied where it is
// rendered, as for every replay. A key never used, used for other
// arguments, or answered with an operation that is gone keeps the
// refusal: for this request it is true. A record that cannot be read
// leaves both open, so the caller is told to ask again with the same key.
func (e *Executor) refusedAuthorization(ctx context.Context, opID string, key operation.RequestKey, digest string, refusal error) (Submission, error) {
	res, err := e.Recorded(ctx, key, digest)
	keyed := Submission{OperationID: opID, Key: key, Digest: digest}
	switch {
	case err == nil && res.Kind == store.Replay:
		keyed.Operation, keyed.Replayed, keyed.Deduplicated = res.Operation, true, res.Bound
		// The audit record says the replay was answered although its
		// authorization refused now.
		keyed.ErrorClass = ErrorClassAuthorizationRefused
		return keyed, nil
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrHolderMissing):
		return Submission{}, refusal
	}
	keyed.MayExist = true
	f := Fail(CodeTemporaryUnavailable, true,
		&NextAction{Hint: "retry this call with the same operation_id (never a new one) to learn the outcome"},
		"this call was not authorized now (%v), and whether operation_id %q already names a recorded operation could not be read; "+
			"if it does, that operation stands: retry with the same operation_id to learn its outcome", refusal, opID)
	f.Cause = err
	return keyed, f
}

// Recorded reads what key records, as a replay of a request with digest
// would be answered: Replay (the operation, or the holder a binding names),
// Conflict (other arguments), or store.ErrNotFound.
func (e *Executor) Recorded(ctx context.Context, key operation.RequestKey, digest string) (store.InsertResult, error) {
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	defer cancel()
	return e.cfg.Store.Recorded(sctx, key, digest)
}

// insertFailure answers an insert that did not come back with an outcome.
// Once the transaction was sent it may have applied with every answer lost;
// the operation then exists and its lease will expire into the reconciler,
// which sends it. So the caller is never told "nothing was sent", only that
// the outcome is unknown and how to learn it: the same operation_id again;
// mayExist says so to the layers that answer in other shapes (tasks).
func insertFailure(opID string, err error) (f *Failure, mayExist bool) {
	switch {
	case errors.Is(err, operation.ErrInvalid):
		f = Fail(CodeInvalidArgument, false, nil, "the operation could not be recorded: %v", err)
	case errors.Is(err, store.ErrNotWritten):
		f = Fail(CodeTemporaryUnavailable, true, nil,
			"the operation store could not be written; nothing was recorded or sent; retry with the same operation_id %q", opID)
	case errors.Is(err, store.ErrHolderMissing):
		f = Fail(CodeNotFound, false, nil,
			"operation_id %q was answered with an operation that no longer exists; use a new operation_id", opID)
	default:
		f = Fail(CodeTemporaryUnavailable, true,
			&NextAction{Hint: "retry this call with the same operation_id (never a new one) to learn the outcome"},
			"the outcome is unknown: the operation may have been recorded, and if so it will be sent; "+
				"retry with the same operation_id %q to learn its outcome", opID)
		mayExist = true
	}
	f.Cause = err
	return f, mayExist
}

// AwaitInFlight lets a replay (or a deduplicated answer) that found its
// operation PENDING, the first attempt still in flight on this or another
// replica, wait for that attempt's outcome instead of answering pending:
// it polls the store with growing pauses until the operation leaves
// PENDING or the caller's budget (its deadline minus the reserve, and at
// most one dispatch lease) runs out, and answers with what it read last.
// A failed read ends the wait with what was known. sub.WaitReads counts
// the reads.
func (e *Executor) AwaitInFlight(ctx context.Context, sub Submission) Submission {
	if !(sub.Replayed || sub.Deduplicated) || sub.Operation.State != operation.StatePending {
		return sub
	}
	deadline := time.Now().Add(min(e.cfg.Budget.Remaining(ctx), e.Lease()))
	pause := e.cfg.ReplayPollFirst
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return sub
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return sub
		case <-t.C:
		}
		sctx, cancel := e.cfg.Budget.StoreContext(ctx)
		op, err := e.cfg.Store.Get(sctx, sub.Operation.Handle)
		cancel()
		sub.WaitReads++
		if err != nil {
			return sub
		}
		sub.Operation = op
		if op.State != operation.StatePending {
			return sub
		}
		pause = min(2*pause, e.cfg.ReplayPollMax)
	}
}

func chooseOperationID(fromArgs, fromHeader string) (string, error) {
	switch {
	case fromArgs != "" && fromHeader != "" && fromArgs != fromHeader:
		return "", Fail(CodeInvalidArgument, false, nil, "operation_id argument and Idempotency-Key header differ; send one key")
	case fromArgs != "":
		return fromArgs, nil
	case fromHeader != "":
		if err := operation.ValidateOperationID(fromHeader); err != nil {
			return "", Fail(CodeInvalidArgument, false, nil, "Idempotency-Key header: %v", err)
		}
		return fromHeader, nil
	}
	return operation.NewOperationID()
}

// Dispatch sends the create for an operation this caller holds the right to
// dispatch (a fresh insert or a won claim), classifies the answer and
// records it with one conditional transition. The downstream call ends
// before the caller's deadline (budget reserve), and the state write uses a
// context detached from the caller, so a caller that went away still gets
// UNKNOWN recorded rather than a PENDING left to its lease.
//
// Fence before send: the request leaves only after a consistent read shows
// this grant is still the current version with lease enough for the whole
// downstream wait (by this dispatcher's clock; other actors allow the skew
// bound before they expire it). A dispatcher that loses the race while
// holding a verified resource id journals it on the current version.
func (e *Executor) Dispatch(ctx context.Context, tool WriteTool, op operation.Operation) (operation.Operation, TransitionReport, error) {
	var ev operation.Event
	var latency time.Duration
	errClass := ""
	if e.cfg.Budget.Remaining(ctx) <= 0 {
		// Out of time before sending: provably nothing left this process.
		ev = operation.Event{Type: operation.EventNotDispatched, Detail: "deadline budget exhausted before dispatch",
			NextAt: e.cfg.Clock().Add(e.cfg.NotDispatchedDelay)}
		errClass = "budget_exhausted"
	} else if reason := e.fence(ctx, op); reason != "" {
		// Nothing was sent. On a stale version the transition below fails
		// and returns the current state, which wins.
		ev = operation.Event{Type: operation.EventNotDispatched, Source: "dispatch_fence", Detail: reason,
			NextAt: e.cfg.Clock().Add(e.cfg.NotDispatchedDelay)}
		errClass = "fenced"
	} else {
		dctx, cancel := e.cfg.Budget.DownstreamContext(ctx)
		start := e.cfg.Clock()
		effect, err := tool.Dispatch(dctx, op)
		if err == nil {
			if verr := tool.Verify(dctx, op, effect); verr != nil {
				err = verr
				ev = operation.Event{Type: operation.EventVerifyFailed, Source: "effect_verifier", Result: "unconfirmed",
					ResourceID: effect.ResourceID, Detail: ErrorDetail(verr)}
			} else {
				ev = operation.Event{Type: operation.EventCreateSucceeded, Source: "effect_verifier", Result: "expected_effect_present",
					ResourceID: effect.ResourceID, Receipt: Receipt(op.Handle, effect.ResourceID),
					NextAt: e.AuditAt(op, tool.Recovery(), false)}
			}
		}
		timedOut := dctx.Err() != nil
		cancel()
		latency = e.cfg.Clock().Sub(start)
		now := e.cfg.Clock()
		if err != nil && ev.Type == "" {
			errClass = string(provider.ClassOf(err))
			switch provider.ClassOf(err) {
			case provider.ClassRejected:
				ev = operation.Event{Type: operation.EventBusinessRejected, Source: tool.Name(), Detail: ErrorDetail(err)}
				if op.Attempts() > 1 {
					// A refusal of a re-send says nothing about an earlier
					// attempt still in flight at the provider: not proof.
					ev = operation.Event{Type: operation.EventResponseMissing, Source: tool.Name(),
						Detail: "re-send refused (" + ErrorDetail(err) + "); an earlier attempt may still commit"}
				}
			case provider.ClassNotDispatched:
				ev = operation.Event{Type: operation.EventNotDispatched, Detail: ErrorDetail(err), NextAt: now.Add(e.cfg.NotDispatchedDelay)}
			default:
				ev = operation.Event{Type: operation.EventResponseMissing, Detail: ErrorDetail(err)}
				if timedOut || errors.Is(err, context.DeadlineExceeded) {
					ev.Type, errClass = operation.EventClientTimeout, "timeout"
				}
			}
		}
		if ev.Type == operation.EventVerifyFailed {
			errClass = "verification"
		}
		if ev.Type == operation.EventClientTimeout || ev.Type == operation.EventResponseMissing || ev.Type == operation.EventVerifyFailed {
			ev.NextAt = e.FirstProbeAt(op, tool.Recovery())
		}
	}
	ev.At = e.cfg.Clock()
	rep := TransitionReport{Tool: tool.Name(), From: op, Event: ev, DownstreamLatency: latency, ErrorClass: errClass}
	next, err := e.Transition(ctx, tool.Name(), op, ev, &rep)
	if err != nil && ev.Type == operation.EventCreateSucceeded {
		// Lost the lease or a race while holding a verified effect: the id
		// must outlive this process, on whatever version is current now.
		if cur, jerr := e.journalEvidence(ctx, tool, next, ev); jerr == nil {
			next = cur
		} else {
			err = errors.Join(err, jerr)
		}
	}
	return next, rep, err
}

// fence checks, with a consistent read, that op is still the current
// version and its lease covers the whole downstream wait from now. It
// returns why the dispatch must not be sent, or "" to send.
func (e *Executor) fence(ctx context.Context, op operation.Operation) string {
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	cur, err := e.cfg.Store.Get(sctx, op.Handle)
	cancel()
	switch {
	case err != nil:
		return "dispatch fence: could not confirm the grant is current (" + ErrorDetail(err) + "); nothing sent"
	case cur.Version != op.Version || cur.State != operation.StatePending:
		return fmt.Sprintf("dispatch fence: grant version %d is stale (current %d, %s); nothing sent", op.Version, cur.Version, cur.State)
	}
	if need := e.cfg.Clock().Add(e.cfg.Budget.Downstream); need.After(cur.DueAt) {
		return "dispatch fence: lease ends " + cur.DueAt.UTC().Format(time.RFC3339Nano) +
			", before the whole dispatch could end; nothing sent"
	}
	return ""
}

// FirstProbeAt is when a probe of op's latest dispatch can first prove
// anything: once the provider's settle window has passed and, where the
// provider bounds late commits, once its index can cover the commit
// deadline. Probing earlier only spends the probe budget.
func (e *Executor) FirstProbeAt(op operation.Operation, rec Recovery) time.Time {
	at := e.SettledAt(op, rec.SettleWindow)
	if d := op.DispatchDeadline(); rec.CommitDeadline && !rec.IdempotentCreate && !d.IsZero() && d.Add(rec.SettleWindow).After(at) {
		at = d.Add(rec.SettleWindow)
	}
	return at
}

// AuditAt is when the duplicate audit of op's latest dispatch is due, for
// a provider without request idempotency: after a re-send, or when the
// effect op settles on was found by a search (foundBySearch: a probe's one
// match) rather than answered to a create of its own. The provider keeps
// no request identity, so a found effect may be another request's (a
// withdrawn one's late commit) while op's own create may still land. Due
// once the commit horizon of every dispatch plus the audit's grace
// (AuditGrace) has passed, and the family's settle window (the provider's
// index lag) after that. Zero when no audit is needed.
func (e *Executor) AuditAt(op operation.Operation, rec Recovery, foundBySearch bool) time.Time {
	if rec.IdempotentCreate {
		return time.Time{}
	}
	if op.Attempts() < 2 && !(foundBySearch && op.MayHaveReachedProvider()) {
		return time.Time{}
	}
	return e.AuditCoverage(op).Add(rec.SettleWindow)
}

// WithdrawalAuditAt is when the audit of a withdrawal of op is due: a
// withdrawal trusts the provider's promise that nothing op sent commits
// past the horizon, and the fact it releases may be asked for again at
// once, so the withdrawn operation is searched for as a re-send is, past
// the horizon and the grace. Zero when no dispatch may have reached the
// provider: nothing can commit late.
func (e *Executor) WithdrawalAuditAt(op operation.Operation, rec Recovery) time.Time {
	if !op.MayHaveReachedProvider() {
		return time.Time{}
	}
	return e.AuditCoverage(op).Add(rec.SettleWindow)
}

// AuditGrace is how far past the commit horizon the duplicate audit looks:
// a provider that breaks its promise by less is still caught. It is the
// lease and the clock skew bound, the least a first dispatch's late commit
// is given before the re-send's own horizon, so a re-send's broken promise
// is given as much; looking only at the horizon would leave a re-send that
// commits late to be found after the audit had called the operation clean.
func (e *Executor) AuditGrace() time.Duration {
	return AuditGraceFor(e.Lease(), e.cfg.ClockSkewBound)
}

// AuditCoverage is the instant, by the provider's clock, a duplicate
// audit's search watermark must reach to be conclusive: op's commit
// horizon plus AuditGrace (from now when a dispatch carried no deadline).
func (e *Executor) AuditCoverage(op operation.Operation) time.Time {
	horizon, ok := op.CommitHorizon()
	if !ok {
		horizon = e.cfg.Clock()
	}
	return horizon.Add(e.AuditGrace())
}

// ErrEvidenceNotJournalled: a dispatcher that lost its race held a verified
// effect and could not journal it. The error (which names the resource id)
// is then the only record of the effect, so no caller may take it for a
// lost race and drop it.
var ErrEvidenceNotJournalled = errors.New("verified dispatch evidence not journalled")

// journalEvidence records a stale dispatcher's verified resource id on the
// current version (re-reading on a race), unless the current version
// already names it as its effect. It makes an UNKNOWN due for a probe and
// a SUCCEEDED due for its duplicate audit at once.
func (e *Executor) journalEvidence(ctx context.Context, tool WriteTool, cur operation.Operation, verified operation.Event) (operation.Operation, error) {
	sctx, cancel := e.cfg.Budget.DetachedStoreContext(ctx)
	defer cancel()
	for range 3 {
		if cur.Version == 0 {
			got, err := e.cfg.Store.Get(sctx, cur.Handle)
			if err != nil {
				return cur, fmt.Errorf("%w: %s: %w", ErrEvidenceNotJournalled, verified.ResourceID, err)
			}
			cur = got
		}
		if cur.ResourceID == verified.ResourceID {
			// Already the recorded effect. A FAILED operation does take the
			// id: it is then the only record that an effect exists.
			return cur, nil
		}
		now := e.cfg.Clock()
		ev := operation.Event{Type: operation.EventEvidenceRecorded, At: now, Source: "stale_dispatcher",
			Result: "verified_resource_id", ResourceID: verified.ResourceID, NextAt: now,
			Detail: "a dispatcher that lost its lease or a race created and verified " + verified.ResourceID}
		next, err := e.Transition(ctx, tool.Name(), cur, ev, nil)
		if err == nil {
			return next, nil
		}
		var stale *store.StaleError
		if !errors.As(err, &stale) {
			return cur, fmt.Errorf("%w: %s: %w", ErrEvidenceNotJournalled, verified.ResourceID, err)
		}
		cur = next // the current version, or a zero Version to re-read
		if stale.Current == nil {
			cur.Version = 0
		}
	}
	return cur, fmt.Errorf("%w: %s: lost three races", ErrEvidenceNotJournalled, verified.ResourceID)
}

// Transition records ev with a detached, store-bounded context and reports
// it. On a stale version the stored operation is returned: someone else
// (a reconciler, another replica) moved it on, and that later state wins.
func (e *Executor) Transition(ctx context.Context, toolName string, op operation.Operation, ev operation.Event, rep *TransitionReport) (operation.Operation, error) {
	sctx, cancel := e.cfg.Budget.DetachedStoreContext(ctx)
	defer cancel()
	next, err := e.cfg.Store.Transition(sctx, op, ev)
	if err != nil {
		var stale *store.StaleError
		if errors.As(err, &stale) {
			if stale.Current != nil {
				return *stale.Current, err
			}
			if cur, gerr := e.cfg.Store.Get(sctx, op.Handle); gerr == nil {
				return cur, err
			}
		}
		return op, err
	}
	if rep == nil {
		rep = &TransitionReport{Tool: toolName, From: op, Event: ev}
	}
	rep.To = next
	rep.Event = next.Journal[len(next.Journal)-1]
	if e.cfg.Observe != nil {
		e.cfg.Observe(ctx, *rep)
	}
	return next, nil
}

// Receipt is the effect receipt issued once an effect is verified: stable
// for the operation and resource, so re-issuing it is idempotent.
func Receipt(handle, resourceID string) string {
	sum := sha256.Sum256([]byte(handle + "|" + resourceID))
	return "receipt-" + hex.EncodeToString(sum[:6])
}

// NeverSent reports whether err proves the provider was never asked (no
// byte of the request was written): a lookup that failed so asked
// nothing, and spends nothing that counts the provider's answers.
func NeverSent(err error) bool {
	return err != nil && provider.ClassOf(err) == provider.ClassNotDispatched
}

// ErrorClass is how a failed provider call is classed in audit records:
// "timeout", "http_<status>" for an answer with an error status, else its
// provider class (not_dispatched, unknown, ...); "" for nil.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	var pe *provider.Error
	if errors.As(err, &pe) && pe.StatusCode != 0 {
		return fmt.Sprintf("http_%d", pe.StatusCode)
	}
	return string(provider.ClassOf(err))
}

// ErrorDetail is how an error is written into the journal: for provider
// errors only class, status and code, never a provider's body.
func ErrorDetail(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		d := string(pe.Class)
		if pe.StatusCode != 0 {
			d += fmt.Sprintf(" http %d", pe.StatusCode)
		}
		if pe.Code != "" {
			d += " " + pe.Code
		}
		return d
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline exceeded"
	}
	// Our own errors (e.g. a verification mismatch) carry no provider body.
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160]
	}
	return msg
}
