package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// ErrUnknownTool: an operation names a tool no registered family serves.
var ErrUnknownTool = errors.New("no tool family for operation")

// Claim results.
const (
	ClaimWon  = "won"
	ClaimLost = "lost"
)

// Probe result names recorded in the journal; the review packet shows each
// probe as a reconciliation check with a source and this result
// (docs/design.md, Review packet).
const (
	ResultLookupFailed     = "lookup_failed"
	ResultOneExactMatch    = "one_exact_match"
	ResultMultipleMatches  = "multiple_matches"
	ResultNotFound         = "not_found"
	ResultNotFoundUnproven = "not_found_unproven"
)

// Result is what one Reconcile call decided.
type Result struct {
	Handle string
	From   operation.State
	// To is the state after this call: after the winner's dispatch when a
	// claim was won.
	To operation.State
	// Event is the reconciler's own transition event (empty when skipped).
	Event operation.EventType
	// ClaimResult is ClaimWon, ClaimLost or "" when no claim was tried.
	ClaimResult string
	// Dispatch is the event the claim winner's re-send recorded.
	Dispatch operation.EventType
	// Skipped: nothing was written by this call (not due, nothing to do, or
	// another worker moved the operation first).
	Skipped bool
	// Reason says briefly why, for logs and tests.
	Reason string
	// ErrorClass is why the provider call this decision rests on failed
	// (tools.ErrorClass), for the audit record; "" when it did not.
	ErrorClass string
	// NotSent: the search never reached the provider (refused, every
	// connection held); its due time was moved on and nothing was spent.
	NotSent bool
}

// Reconcile decides one operation using its tool family. It acts only on
// what is due; a lost conditional write is reported in the Result, not as
// an error.
func (s *Service) Reconcile(ctx context.Context, op operation.Operation) (Result, error) {
	res := Result{Handle: op.Handle, From: op.State, To: op.State}
	family, ok := s.cfg.Families[op.Key.Tool]
	if !ok {
		return res, fmt.Errorf("reconcile %s: %w: %q", op.Handle, ErrUnknownTool, op.Key.Tool)
	}
	now := s.cfg.Executor.Now()
	if !op.NeedsReconciliation() {
		return skip(res, "state needs no reconciliation"), nil
	}
	due := op.DueAt
	if op.State == operation.StatePending {
		// The lease is the dispatcher's clock; ours may be ahead by up to
		// the skew bound. Expire only when it has surely ended.
		due = due.Add(s.cfg.Executor.ClockSkewBound())
	}
	if due.After(now) {
		return skip(res, "not due until "+due.UTC().Format(time.RFC3339Nano)), nil
	}
	switch op.State {
	case operation.StatePending:
		return s.expireLease(ctx, family, op, now, res)
	case operation.StateUnknown:
		return s.probe(ctx, family, op, now, res)
	case operation.StateSucceeded:
		return s.duplicateAudit(ctx, family, op, now, res)
	case operation.StateFailed:
		return s.withdrawalAudit(ctx, family, op, now, res)
	default: // RETRYABLE
		return s.retry(ctx, family, op, now, res)
	}
}

func skip(res Result, reason string) Result {
	res.Skipped, res.Reason = true, reason
	return res
}

// expireLease: a PENDING operation past its lease has lost its dispatcher.
// The call may or may not have reached the provider, so it becomes
// UNKNOWN, due for its first probe when that can prove anything (at once
// for most families; for a provider that bounds late commits, once its
// index can cover the commit deadline, which the lease end reaches only
// without the index lag).
func (s *Service) expireLease(ctx context.Context, family tools.WriteTool, op operation.Operation, now time.Time, res Result) (Result, error) {
	next := s.cfg.Executor.FirstProbeAt(op, family.Recovery())
	if next.Before(now) {
		next = now
	}
	ev := operation.Event{
		Type: operation.EventDispatcherLost, At: now, NextAt: next, Source: "reconciler",
		Detail: "dispatch lease expired at " + op.DueAt.UTC().Format(time.RFC3339Nano) + " without a recorded outcome",
	}
	return s.decide(ctx, family, op, ev, res)
}

// probe looks an UNKNOWN operation up and decides on the evidence.
func (s *Service) probe(ctx context.Context, family tools.WriteTool, op operation.Operation, now time.Time, res Result) (Result, error) {
	rec := family.Recovery()
	if op.ProbeCount >= rec.ProbeBudget {
		ev := operation.Event{Type: operation.EventProbeBudgetExhausted, At: now, Source: "reconciler", Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: %d probes without proof", s.cfg.Operator, op.ProbeCount)}
		return s.decide(ctx, family, op, ev, res)
	}
	// Past its max age an operation is no longer retried or probed again,
	// but it is looked up once more first: a reconciler that was down that
	// long must still name a duplicate as an incident, and a verified
	// effect needs no human.
	tooOld := rec.MaxAge > 0 && now.Sub(op.CreatedAt) > rec.MaxAge

	before := s.cfg.Executor.Now()
	answer, asked, err := s.search(ctx, family, op, tooOld, "probe", &res)
	if !asked {
		return res, err
	}
	found, err := answer.found, answer.err
	now = s.cfg.Executor.Now()
	if why := s.skewExceeded(op, found, before, now); why != "" {
		ev := operation.Event{Type: operation.EventClockSkewExceeded, At: now, Source: "reconciler", Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: %s; no timestamp comparison may decide this operation", s.cfg.Operator, why)}
		return s.decide(ctx, family, op, ev, res)
	}
	source := found.Source
	if source == "" {
		source = family.Name()
	}
	settled := s.cfg.Executor.SettledAt(op, rec.SettleWindow)
	if outcome, ok := op.DispatchOutcome(); ok && outcome.NextAt.After(settled) {
		// The dispatcher's own first-probe time, computed with its budget,
		// which may be longer than this process's.
		settled = outcome.NextAt
	}
	var ev operation.Event
	switch {
	case err != nil:
		ev = operation.Event{Type: operation.EventProbeInconclusive, Source: source, Result: ResultLookupFailed,
			Outcome: operation.OutcomeProviderStatusUnavailable, NextAt: now.Add(s.wait(op.ProbeCount)),
			Detail: "lookup failed: " + tools.ErrorDetail(err)}
	case len(found.Matches) == 1 && found.Authoritative:
		// One match from a lookup that may hide others is not "exactly one".
		id := found.Matches[0]
		ev = operation.Event{Type: operation.EventProbeFoundOne, Source: source, Result: ResultOneExactMatch,
			ResourceID: id, Receipt: tools.Receipt(op.Handle, id), Detail: found.Detail,
			// A match the journal already names as op's own (a create
			// answered but not verified) leaves no own create to come.
			NextAt: s.cfg.Executor.AuditAt(op, rec, !slices.Contains(op.EffectEvidence(), id))}
	case len(found.Matches) > 1:
		ev = operation.Event{Type: operation.EventProbeMultiple, Source: source, Result: ResultMultipleMatches,
			Duplicates: len(found.Matches),
			Detail: fmt.Sprintf("incident: %d matching effects [%s]; escalated to %s; nothing deleted or chosen",
				len(found.Matches), strings.Join(found.Matches, ", "), s.cfg.Operator)}
	case found.Authoritative && !now.Before(settled) && !rec.IdempotentCreate && !found.LateCommitsBounded:
		// Absence now says nothing about a create the provider may still
		// commit later: a re-send could make a second effect.
		ev = operation.Event{Type: operation.EventResendUnsafe, Source: source, Result: ResultNotFound, Actor: s.cfg.Operator,
			Detail: joinDetail(found.Detail, "escalated to "+s.cfg.Operator+
				": the provider neither deduplicates creates nor bounds late commits; a re-send is not safe")}
	case found.Authoritative && !now.Before(settled):
		ev = operation.Event{Type: operation.EventProbeNotFound, Source: source, Result: ResultNotFound,
			Outcome: operation.OutcomeFailedWithoutEffect, NextAt: now.Add(s.wait(op.RetryCount)),
			LateCommitsBounded: found.LateCommitsBounded,
			Detail:             joinDetail(found.Detail, "authoritative absence after the settle window")}
	default:
		why := "zero matches from a non-authoritative lookup"
		switch {
		case len(found.Matches) == 1:
			why = "one match from a lookup that may hide others"
		case found.Authoritative:
			why = "zero matches inside the settle window (until " + settled.UTC().Format(time.RFC3339Nano) + ")"
		}
		next := now.Add(s.wait(op.ProbeCount))
		if settled.After(next) {
			next = settled
		}
		if ready := now.Add(min(found.ReadyIn, backoffCap)); ready.After(next) {
			// The provider's index cannot cover the commit horizon before
			// then (at its present lag): probing earlier would only spend
			// the budget. Capped, since the lag may shrink.
			next = ready
		}
		ev = operation.Event{Type: operation.EventProbeInconclusive, Source: source, Result: ResultNotFoundUnproven,
			Outcome: operation.OutcomeVerificationInconclusive, NextAt: next, Detail: joinDetail(found.Detail, why)}
	}
	if tooOld && ev.Type != operation.EventProbeFoundOne && ev.Type != operation.EventProbeMultiple {
		ev = operation.Event{Type: operation.EventProbeBudgetExhausted, Source: "reconciler", Actor: s.cfg.Operator,
			Detail: joinDetail(fmt.Sprintf("escalated to %s: outcome unknown for %s (max age %s) after %d probes",
				s.cfg.Operator, now.Sub(op.CreatedAt).Round(time.Second), rec.MaxAge, op.ProbeCount+1), ev.Detail)}
	}
	ev.At = now
	return s.decide(ctx, family, op, ev, res)
}

// retry claims a due RETRYABLE operation by CAS; only the winner re-sends,
// with the same handle and so the same request key.
func (s *Service) retry(ctx context.Context, family tools.WriteTool, op operation.Operation, now time.Time, res Result) (Result, error) {
	rec := family.Recovery()
	if op.RetryCount >= rec.RetryBudget {
		ev := operation.Event{Type: operation.EventRetryBudgetExhausted, At: now, Source: "reconciler", Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: retry budget of %d exhausted after %d attempts", s.cfg.Operator, rec.RetryBudget, op.Attempts())}
		return s.decide(ctx, family, op, ev, res)
	}
	if ids := op.EffectEvidence(); len(ids) > 0 && !rec.IdempotentCreate {
		// An effect is on record although absence was proven: the provider
		// broke its promise or a stale dispatcher's evidence arrived late.
		ev := operation.Event{Type: operation.EventRetryBudgetExhausted, At: now, Source: "reconciler", Actor: s.cfg.Operator,
			Outcome: operation.OutcomeVerificationInconclusive,
			Detail: fmt.Sprintf("escalated to %s: effect evidence [%s] on record; a re-send could duplicate it",
				s.cfg.Operator, strings.Join(ids, ", "))}
		return s.decide(ctx, family, op, ev, res)
	}
	if left, bounded := remaining(ctx); bounded && left < s.cfg.Executor.ClaimNeeds() {
		// A claim without time to send would burn a retry for nothing.
		return skip(res, "too little time left to dispatch a claimed retry"), nil
	}
	lease := now.Add(s.cfg.Executor.Lease())
	ev := operation.Event{Type: operation.EventRetryClaimed, At: now, Source: "reconciler",
		LeaseUntil: lease, CommitDeadline: s.cfg.Executor.CommitDeadline(lease), Detail: retryGate(op, rec)}
	claimed, err := s.cfg.Executor.Transition(ctx, family.Name(), op, ev, nil)
	if err != nil {
		if isStale(err) {
			res.ClaimResult, res.To = ClaimLost, claimed.State
			res = skip(res, "claim lost: another worker moved the operation first")
			s.audit(ctx, op, claimed, res)
			return res, nil
		}
		return res, fmt.Errorf("reconcile %s: claim: %w", op.Handle, err)
	}
	res.Event, res.ClaimResult, res.To = operation.EventRetryClaimed, ClaimWon, claimed.State
	s.audit(ctx, op, claimed, res)

	next, rep, err := s.cfg.Executor.Dispatch(ctx, family, claimed)
	res.To = next.State
	if len(next.Journal) > 0 && next.Version > claimed.Version {
		res.Dispatch = next.Journal[len(next.Journal)-1].Type
	}
	if err != nil && (!isStale(err) || errors.Is(err, tools.ErrEvidenceNotJournalled)) {
		// The claim stands under its lease; the sweep expires it to UNKNOWN.
		// A lost race is no failure, but a verified effect it could not
		// journal is: this error, logged, is then its only record.
		return res, fmt.Errorf("reconcile %s: record retried dispatch (%s): %w", op.Handle, rep.ErrorClass, err)
	}
	return res, nil
}

// providerAnswer is what one search of the provider returned.
type providerAnswer struct {
	found tools.ProbeResult
	err   error
}

// search asks the provider once about op's intended effect, within the
// downstream budget, and returns its answer with asked true. asked is
// false when the search must not count: too little of the invocation is
// left for a whole one (a search cut short would be counted without
// asking the provider), or the provider was never asked (its connections
// all held by requests it is still working on) and op is not past its max
// age, so nothing is spent of a budget an unreachable provider still
// exhausts by age. res then says why; err is set only when our own
// invocation ran out, which says nothing about the provider. what names
// the search in both ("probe", "audit").
func (s *Service) search(ctx context.Context, family tools.WriteTool, op operation.Operation, tooOld bool, what string, res *Result) (answer providerAnswer, asked bool, err error) {
	budget := s.cfg.Executor.Budget()
	if budget.Remaining(ctx) < budget.Downstream {
		*res = skip(*res, "too little time left for a whole "+what)
		return answer, false, nil
	}
	pctx, cancel := budget.DownstreamContext(ctx)
	answer.found, answer.err = family.Probe(pctx, op)
	cancel()
	res.ErrorClass = tools.ErrorClass(answer.err)
	if answer.err != nil && ctx.Err() != nil {
		return answer, false, fmt.Errorf("reconcile %s: %s interrupted: %w", op.Handle, what, ctx.Err())
	}
	if tools.NeverSent(answer.err) && !tooOld {
		*res = skip(*res, what+" not sent: "+tools.ErrorDetail(answer.err))
		res.NotSent = true
		// Nothing is spent, but op must not stay at the head of the
		// oldest-first sweep: a provider that refuses every connection
		// would keep each sweep on its operations and off everyone else's.
		if perr := s.postpone(ctx, op); perr != nil {
			return answer, false, fmt.Errorf("reconcile %s: %s not sent, and its due time could not be moved on: %w", op.Handle, what, perr)
		}
		return answer, false, nil
	}
	return answer, true, nil
}

// notSentDelay is how far a search the provider never received moves its
// operation's due time: long enough that an unreachable provider's
// operations do not come due at every sweep, short enough that they are
// looked at soon after it is back.
const notSentDelay = 30 * time.Second

// postpone moves op's due time on after a search that was never sent.
func (s *Service) postpone(ctx context.Context, op operation.Operation) error {
	sctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
	defer cancel()
	_, err := s.st.Postpone(sctx, op, s.cfg.Executor.Now().Add(max(s.wait(op.ProbeCount), notSentDelay)))
	return err
}

// needsSearch: reconciling op now means asking its provider (a probe or
// an audit), unless op is past its family's max age, where an unanswered
// search counts and may end with the operator.
func needsSearch(op operation.Operation, rec tools.Recovery, now time.Time) bool {
	switch {
	case rec.MaxAge > 0 && now.Sub(op.CreatedAt) > rec.MaxAge:
		return false
	case op.State == operation.StateUnknown, op.AuditPending(), op.WithdrawalAuditPending():
		return true
	}
	return false
}

// duplicateAudit is the one more search by intended effect after a
// re-send, once the provider's commit horizon has passed (or at once when
// a stale dispatcher journalled another effect). A second effect turns the
// SUCCEEDED operation into the incident; dependent actions stay blocked
// until the audit is clean.
func (s *Service) duplicateAudit(ctx context.Context, family tools.WriteTool, op operation.Operation, now time.Time, res Result) (Result, error) {
	rec := family.Recovery()
	before := now
	answer, asked, err := s.search(ctx, family, op, rec.MaxAge > 0 && now.Sub(op.CreatedAt) > rec.MaxAge, "audit", &res)
	if !asked {
		return res, err
	}
	found, err := answer.found, answer.err
	now = s.cfg.Executor.Now()
	source := found.Source
	if source == "" {
		source = family.Name()
	}
	// The promise bounds late commits at the horizon; the audit looks its
	// grace further, for a create that breaks the promise, the re-send's
	// included. (Without a bound there is no horizon to look past, and no
	// clean audit either.)
	coverage := s.cfg.Executor.AuditCoverage(op)
	graceCovered := rec.IdempotentCreate || !found.LateCommitsBounded || !found.IndexedThrough.Before(coverage)
	var ev operation.Event
	switch why := s.skewExceeded(op, found, before, now); {
	case why != "":
		ev = operation.Event{Type: operation.EventClockSkewExceeded, Source: "reconciler", Actor: s.cfg.Operator,
			Outcome: operation.OutcomeVerificationInconclusive,
			Detail:  fmt.Sprintf("escalated to %s: duplicate audit impossible: %s", s.cfg.Operator, why)}
	case err == nil && len(found.Matches) > 1:
		ev = operation.Event{Type: operation.EventAuditMultiple, Source: source, Result: ResultMultipleMatches,
			Duplicates: len(found.Matches),
			Detail: fmt.Sprintf("incident: duplicate audit found %d matching effects [%s]%s; escalated to %s; nothing deleted or chosen",
				len(found.Matches), strings.Join(found.Matches, ", "), approvalNote(op), s.cfg.Operator)}
	case err == nil && found.Authoritative && (rec.IdempotentCreate || found.LateCommitsBounded && graceCovered):
		ev = operation.Event{Type: operation.EventAuditClean, Source: source, Result: ResultOneExactMatch,
			Detail: joinDetail(found.Detail, "duplicate audit clean: one effect past the commit horizon and the audit's grace")}
	case auditPasses(op, operation.StateSucceeded)+1 >= rec.ProbeBudget:
		ev = operation.Event{Type: operation.EventAuditExhausted, Source: source, Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: duplicate audit could not complete after %d searches%s",
				s.cfg.Operator, auditPasses(op, operation.StateSucceeded)+1, approvalNote(op))}
	default:
		detail, readyIn := found.Detail, found.ReadyIn
		if err != nil {
			detail = "lookup failed: " + tools.ErrorDetail(err)
		}
		if err == nil && !graceCovered {
			readyIn = max(readyIn, coverage.Sub(found.IndexedThrough))
			detail = joinDetail(detail, fmt.Sprintf("the index must reach %s (the commit horizon plus the audit's grace %s)",
				coverage.UTC().Format(time.RFC3339Nano), s.cfg.Executor.AuditGrace()))
		}
		next := now.Add(s.wait(auditPasses(op, operation.StateSucceeded)))
		if ready := now.Add(min(readyIn, backoffCap)); ready.After(next) {
			next = ready
		}
		ev = operation.Event{Type: operation.EventAuditDeferred, Source: source, Result: ResultNotFoundUnproven,
			NextAt: next, Detail: joinDetail(detail, "duplicate audit not yet conclusive")}
	}
	ev.At = now
	return s.decide(ctx, family, op, ev, res)
}

// approvalNote flags an incident whose operation could already have been
// approved: it was SUCCEEDED with no audit pending at some point.
func approvalNote(op operation.Operation) string {
	if op.ApprovableBefore() {
		return "; an approval of a dependent action may already have been given"
	}
	return ""
}

// skewExceeded says why two clocks disagree beyond the bound, or "". The
// provider's own time must fall within our probe's [before, after] widened
// by the bound, and no journal entry may come from further in our future.
func (s *Service) skewExceeded(op operation.Operation, found tools.ProbeResult, before, after time.Time) string {
	bound := s.cfg.Executor.ClockSkewBound()
	if pt := found.ProviderTime; !pt.IsZero() {
		if pt.Before(before.Add(-bound)) || pt.After(after.Add(bound)) {
			return fmt.Sprintf("provider clock %s is outside our probe window [%s, %s] by more than the skew bound %s",
				pt.UTC().Format(time.RFC3339Nano), before.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano), bound)
		}
	}
	if op.UpdatedAt.After(after.Add(bound)) {
		return fmt.Sprintf("the journal was written at %s, later than our clock %s plus the skew bound %s",
			op.UpdatedAt.UTC().Format(time.RFC3339Nano), after.UTC().Format(time.RFC3339Nano), bound)
	}
	return ""
}

// retryGate states the retry decision's inputs as one journal line, so a
// reviewer can see why a re-send was allowed (docs/design.md, Review packet).
// The re-send reuses the stored request and handle, so digest and key are
// the same by construction; the evidence is the event that proved absence.
func retryGate(op operation.Operation, rec tools.Recovery) string {
	freshAt, evidence := "none", "none"
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if ev := op.Journal[i]; ev.To == operation.StateRetryable {
			freshAt, evidence = ev.At.UTC().Format(time.RFC3339Nano), string(ev.Type)
			break
		}
	}
	return fmt.Sprintf("retry_gate: prior_state=%s same_request_digest=true same_idempotency_key=true "+
		"provider_supports_idempotency=%t reconciliation_fresh_at=%s evidence=%s retry_budget_remaining=%d decision=allow_single_retry",
		op.Outcome, rec.IdempotentCreate, freshAt, evidence, rec.RetryBudget-op.RetryCount-1)
}

// decide records one reconciler transition. A stale write means another
// worker decided first: reported as skipped, not as an error.
func (s *Service) decide(ctx context.Context, family tools.WriteTool, op operation.Operation, ev operation.Event, res Result) (Result, error) {
	next, err := s.cfg.Executor.Transition(ctx, family.Name(), op, ev, nil)
	if err != nil {
		if isStale(err) {
			res.To = next.State
			res = skip(res, "another worker moved the operation first")
			s.audit(ctx, op, next, res)
			return res, nil
		}
		return res, fmt.Errorf("reconcile %s: %s: %w", op.Handle, ev.Type, err)
	}
	res.Event, res.To = ev.Type, next.State
	s.audit(ctx, op, next, res)
	return res, nil
}

// audit writes one KindReconcile record per decision.
func (s *Service) audit(ctx context.Context, before, after operation.Operation, res Result) {
	if s.cfg.Auditor == nil {
		return
	}
	s.cfg.Auditor.Record(ctx, obs.AuditRecord{
		Kind:             obs.KindReconcile,
		OperationHash:    obs.OperationHash(before.Key),
		Handle:           before.Handle,
		ErrorClass:       res.ErrorClass,
		BusinessKey:      before.BusinessKey,
		Tool:             before.Key.Tool,
		ClientPrincipal:  before.Key.ClientID,
		EndUserPrincipal: before.EndUserID,
		Tenant:           before.TenantID,
		PolicyDecision:   obs.PolicyNotApplicable,
		ArgumentDigest:   before.RequestDigest,
		Status:           string(after.State),
		Outcome:          string(after.Outcome),
		FromState:        string(res.From),
		ToState:          string(after.State),
		Event:            string(res.Event),
		ProbeCount:       after.ProbeCount,
		ClaimResult:      res.ClaimResult,
	})
}

func isStale(err error) bool {
	var stale *store.StaleError
	return errors.As(err, &stale)
}

// remaining is the time left before ctx's deadline; bounded is false
// without one.
func remaining(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(d), true
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}
