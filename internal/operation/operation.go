package operation

import (
	"fmt"
	"slices"
	"time"
)

// MaxJournal bounds the journal so an item stays far below DynamoDB's 400 KB
// limit (server-written events are well under 1 KB; an operator's evidence,
// the longest, is at most 1,000 characters). The reconciler's probe and
// retry budgets escalate long before it is reached; reaching it anyway is
// refused, not truncated, so history is never silently lost.
const MaxJournal = 80

// Operation is one business write and everything known about it.
type Operation struct {
	Handle        string // public handle, derived from Key (review_id, ticket handle)
	Key           RequestKey
	BusinessKey   string
	RequestDigest string
	EndUserID     string
	TenantID      string            // merchant or team the end user acts for
	Target        map[string]string // the uniqueness fields (order_id; service/commit/environment)
	Payload       map[string]string // validated arguments kept to re-send the same request

	State   State
	Outcome Outcome
	Version int64

	RetryCount     int // claimed retries; Attempts() derives the dispatch count
	ProbeCount     int // reconciliation probes since the last dispatch
	ClientTimeouts int

	ResourceID         string // the downstream's id for the effect
	Receipt            string // effect receipt, issued once the effect is verified
	DuplicateResources int
	Escalation         string // why an operator is needed

	// DueAt is when the reconciler must look again: lease expiry (PENDING),
	// next probe (UNKNOWN) or next_retry_at (RETRYABLE). Zero when settled.
	DueAt          time.Time
	LastDispatchAt time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time

	Journal []Event
}

// Intent is what a tool knows before anything is stored.
type Intent struct {
	Key           RequestKey
	BusinessKey   string
	RequestDigest string
	EndUserID     string
	TenantID      string
	Target        map[string]string
	Payload       map[string]string
}

// New records an intent as a PENDING operation holding a dispatch lease.
// Its journal starts with intent_recorded and provider_dispatch_started:
// the insert is the write that grants the right to dispatch.
func New(in Intent, now time.Time, lease time.Duration) (Operation, error) {
	if err := in.Validate(); err != nil {
		return Operation{}, err
	}
	if lease <= 0 {
		return Operation{}, invalid("lease", "must be positive")
	}
	op := Operation{
		Handle:         in.Key.Handle(),
		Key:            in.Key,
		BusinessKey:    in.BusinessKey,
		RequestDigest:  in.RequestDigest,
		EndUserID:      in.EndUserID,
		TenantID:       in.TenantID,
		Target:         in.Target,
		Payload:        in.Payload,
		State:          StatePending,
		Outcome:        OutcomePending,
		Version:        1,
		DueAt:          now.Add(lease),
		LastDispatchAt: now,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	op.Journal = []Event{
		{Type: EventIntentRecorded, At: now, To: StatePending, Source: "gateway_journal"},
		{Type: EventDispatchStarted, At: now, From: StatePending, To: StatePending, Detail: "attempt 1", LeaseUntil: op.DueAt},
	}
	return op, nil
}

// Validate checks an intent before any write.
func (in Intent) Validate() error {
	if _, err := NewRequestKey(in.Key.ClientID, in.Key.TenantID, in.Key.Subject, in.Key.Tool, in.Key.OperationID); err != nil {
		return err
	}
	if in.Key.TenantID != in.TenantID {
		return invalid("tenant", "the request key must be scoped by the intent's own tenant")
	}
	if in.Key.Subject != in.EndUserID {
		return invalid("end_user_principal", "the request key must be scoped by the intent's own end user")
	}
	if in.BusinessKey == "" || len(in.BusinessKey) > MaxBusinessKeyLen {
		return invalid("business_key", fmt.Sprintf("must be 1 to %d bytes", MaxBusinessKeyLen))
	}
	if len(in.RequestDigest) != len("sha256:")+64 || in.RequestDigest[:7] != "sha256:" {
		return invalid("request_digest", "must be sha256: followed by 64 hex digits")
	}
	if err := validatePrincipal("end_user_principal", in.EndUserID); err != nil {
		return err
	}
	return nil
}

// Apply returns the operation after ev, or an error if the table refuses
// the event in the current state or the journal is full. The receiver is not
// modified: the store writes the result conditioned on the receiver's
// version and state, so a concurrent writer makes the write fail instead of
// overwriting a later state.
func (op Operation) Apply(ev Event) (Operation, error) {
	to, ok := Next(op.State, ev.Type)
	if !ok {
		return Operation{}, &TransitionError{From: op.State, Event: ev.Type}
	}
	if len(op.Journal) >= MaxJournal {
		return Operation{}, fmt.Errorf("%w: %d events on %s", ErrJournalFull, len(op.Journal), op.Handle)
	}
	if ev.At.IsZero() {
		return Operation{}, invalid("event.at", "must be set")
	}
	if op.State == StateFailed && ev.Type == EventOperatorFailed && !op.AwaitsOperator() {
		return Operation{}, fmt.Errorf("%w: %s has no effect reported after it failed, nor an escalated withdrawal audit, to close", &TransitionError{From: op.State, Event: ev.Type}, op.Handle)
	}
	if op.State == StateFailed && ev.Type != EventEvidenceRecorded && ev.Type != EventOperatorFailed && !op.WithdrawalAuditPending() {
		return Operation{}, fmt.Errorf("%w: %s has no withdrawal audit pending", &TransitionError{From: op.State, Event: ev.Type}, op.Handle)
	}
	if ev.Type == EventClientCancelled && !op.EffectRuledOut() {
		// The withdrawal releases the business fact on the caller's word:
		// only an operation that can have no effect, now or later, may be.
		return Operation{}, fmt.Errorf("%w: %s may still have an effect at the provider", &TransitionError{From: op.State, Event: ev.Type}, op.Handle)
	}
	ev.From, ev.To = op.State, to
	decided := ev.Outcome != ""
	switch {
	case decided:
	case op.State == StateFailed:
		ev.Outcome = op.Outcome // settled below, once the event is journalled
	default:
		ev.Outcome = defaultOutcome(ev.Type, op.Outcome)
	}

	next := op
	next.Journal = append(append([]Event(nil), op.Journal...), ev)
	if op.State == StateFailed && !decided {
		// FAILED stays FAILED, but the outcome is what is known about the
		// effect: an effect reported after the failure, or a withdrawal's
		// audit that could not finish, leaves the absence unproven until
		// an operator closes it.
		ev.Outcome = next.failureOutcome()
		if next.AwaitsOperator() {
			ev.Outcome = OutcomeVerificationInconclusive
		}
		next.Journal[len(next.Journal)-1].Outcome = ev.Outcome
	}
	next.State, next.Outcome = to, ev.Outcome
	next.Version = op.Version + 1
	next.UpdatedAt = ev.At

	switch ev.Type {
	case EventClientTimeout:
		next.ClientTimeouts++
	case EventProbeFoundOne, EventProbeNotFound, EventProbeInconclusive, EventProbeMultiple,
		EventAuditClean, EventAuditDeferred, EventAuditMultiple:
		next.ProbeCount++
	case EventRetryClaimed:
		next.RetryCount++
		next.ProbeCount = 0
		next.LastDispatchAt = ev.At
	}
	if ev.ResourceID != "" && ev.Type != EventEvidenceRecorded && ev.Type != EventOperatorFailed {
		// Evidence is journalled, never promoted: it may be a second effect.
		// A FAILED resolution's named resource was removed at the provider:
		// journalled too, never the failed operation's resource.
		next.ResourceID = ev.ResourceID
	}
	if ev.Receipt != "" {
		next.Receipt = ev.Receipt
	}
	if ev.Duplicates > 0 {
		next.DuplicateResources = ev.Duplicates
	}
	if to == StateEscalated && op.State != StateEscalated {
		// Set on entering: evidence journalled afterwards adds to what the
		// operator reads, it does not replace why the operator was called.
		next.Escalation = ev.Detail
	}

	switch to {
	case StatePending:
		if ev.Type == EventEvidenceRecorded {
			break // the dispatcher's lease stands
		}
		if ev.LeaseUntil.IsZero() {
			return Operation{}, invalid("event.lease_until", "a PENDING operation needs a lease")
		}
		next.DueAt = ev.LeaseUntil
	case StateUnknown, StateRetryable:
		// Without a time the reconciler looks again at once: never lose track.
		next.DueAt = ev.NextAt
		if next.DueAt.IsZero() {
			next.DueAt = ev.At
		}
	case StateSucceeded:
		// Due again only for a scheduled duplicate audit.
		next.DueAt = ev.NextAt
	case StateFailed:
		// Due again only for a withdrawal's audit: the withdrawal schedules
		// it, the audit's own events (its evidence included) reschedule or
		// end it, and an operator's closing leaves it as it was. A stale
		// dispatcher's evidence carries NextAt now: the audit looks at once.
		switch {
		case ev.Type == EventClientCancelled:
			next.DueAt = ev.NextAt
		case op.State != StateFailed || op.DueAt.IsZero():
			next.DueAt = time.Time{}
		case ev.Type == EventOperatorFailed:
			next.DueAt = op.DueAt
		default:
			next.DueAt = ev.NextAt
		}
	default:
		next.DueAt = time.Time{}
	}
	return next, nil
}

// failureOutcome is the outcome op was given when it entered FAILED.
func (op Operation) failureOutcome() Outcome {
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if ev := op.Journal[i]; ev.To == StateFailed && ev.From != StateFailed {
			return ev.Outcome
		}
	}
	return OutcomeFailedWithoutEffect
}

// NeedsReconciliation reports whether the reconciler must look at op
// again: its state needs it, or it SUCCEEDED with a duplicate audit still
// due, or it was withdrawn with its audit still due. Only such operations carry the due index attributes.
func (op Operation) NeedsReconciliation() bool {
	return op.State.NeedsReconciliation() || op.AuditPending() || op.WithdrawalAuditPending()
}

// WithdrawalAuditPending: op was withdrawn (client_cancelled) after a
// dispatch that may have left, and the audit that looks for the
// provider breaking its promise has not finished.
func (op Operation) WithdrawalAuditPending() bool {
	return op.State == StateFailed && !op.DueAt.IsZero()
}

// WithdrawalAuditEscalated: op's withdrawal audit ended for an operator
// (duplicate_audit_exhausted: it could not finish, or found more than op
// could have made) and no operator has closed it since.
func (op Operation) WithdrawalAuditEscalated() bool {
	escalated := false
	for _, ev := range op.Journal {
		switch {
		case ev.From == StateFailed && ev.Type == EventAuditExhausted:
			escalated = true
		case ev.From == StateFailed && ev.Type == EventOperatorFailed:
			escalated = false
		}
	}
	return op.State == StateFailed && escalated
}

// AwaitsOperator: op FAILED and something an operator must close is open
// on it: an effect reported after it failed, or its withdrawal's audit
// ended for an operator. Its record is kept until then.
func (op Operation) AwaitsOperator() bool {
	return op.State == StateFailed && (len(op.EffectsReportedAfterFailure()) > 0 || op.WithdrawalAuditEscalated())
}

// AuditPending: op SUCCEEDED after a re-send (or with evidence of another
// effect) and the duplicate audit has not yet cleared it.
func (op Operation) AuditPending() bool {
	return op.State == StateSucceeded && !op.DueAt.IsZero()
}

// CommitHorizon is the latest commit deadline of every dispatch op was
// granted: no create of op commits after it at a provider that keeps its
// promise. ok is false when some dispatch carried no deadline.
func (op Operation) CommitHorizon() (horizon time.Time, ok bool) {
	grants := 0
	for _, ev := range op.Journal {
		if ev.Type != EventDispatchStarted && ev.Type != EventRetryClaimed {
			continue
		}
		grants++
		if ev.CommitDeadline.IsZero() {
			return time.Time{}, false
		}
		if ev.CommitDeadline.After(horizon) {
			horizon = ev.CommitDeadline
		}
	}
	return horizon, grants > 0
}

// ApprovableBefore reports whether op was, at some point, SUCCEEDED with
// no duplicate audit pending: a dependent action (approve_rollout) could
// have been approved then. Approvals are not stored here, so an incident
// raised afterwards flags that one may already have been given.
func (op Operation) ApprovableBefore() bool {
	for _, ev := range op.Journal {
		if ev.To == StateSucceeded && ev.NextAt.IsZero() {
			return true
		}
	}
	return false
}

// DispatchDeadline is the commit deadline of op's latest dispatch grant
// (zero when it carried none): what the dispatcher sends with the create.
func (op Operation) DispatchDeadline() time.Time {
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if ev := op.Journal[i]; ev.Type == EventDispatchStarted || ev.Type == EventRetryClaimed {
			return ev.CommitDeadline
		}
	}
	return time.Time{}
}

// WithCommitDeadline records deadline on the dispatch grant of a new,
// not yet stored operation (its provider_dispatch_started event).
func (op Operation) WithCommitDeadline(deadline time.Time) Operation {
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if op.Journal[i].Type == EventDispatchStarted {
			journal := append([]Event(nil), op.Journal...)
			journal[i].CommitDeadline = deadline
			op.Journal = journal
			break
		}
	}
	return op
}

// EffectEvidence lists, once each and in journal order, every resource id
// the journal names as an effect of op: verified creates, probe matches,
// evidence a stale dispatcher journalled, an operator's resolution.
func (op Operation) EffectEvidence() []string {
	var ids []string
	seen := map[string]bool{}
	for _, ev := range op.Journal {
		if ev.ResourceID != "" && !seen[ev.ResourceID] {
			seen[ev.ResourceID] = true
			ids = append(ids, ev.ResourceID)
		}
	}
	return ids
}

// EffectsReportedAfterFailure lists, once each, the resource ids a stale
// dispatcher journalled after op had FAILED and no operator has closed
// since: verified effects of an operation recorded as having none (the
// provider broke its promise, or a search missed them). The fact's
// business key is already released, so such an operation is an incident
// for an operator, never a reason to ask for the fact again.
func (op Operation) EffectsReportedAfterFailure() []string {
	open, _ := op.effectsAfterFailure()
	return open
}

// EffectsClosedAfterFailure lists, once each, the ids reported after op
// FAILED that an operator has since closed (removed at the provider, or
// found to be the effect of the operation holding the fact now): effects
// that existed although op is recorded as having none.
func (op Operation) EffectsClosedAfterFailure() []string {
	_, closed := op.effectsAfterFailure()
	return closed
}

// effectsAfterFailure reads the journal once for both lists: an operator's
// closing (operator_resolved_failed from FAILED) moves every open id to
// closed.
func (op Operation) effectsAfterFailure() (open, closed []string) {
	for _, ev := range op.Journal {
		switch {
		case ev.Type == EventOperatorFailed && ev.From == StateFailed:
			for _, id := range open {
				if !slices.Contains(closed, id) {
					closed = append(closed, id)
				}
			}
			open = nil
		case ev.Type == EventEvidenceRecorded && ev.From == StateFailed && ev.ResourceID != "" && !slices.Contains(open, ev.ResourceID):
			open = append(open, ev.ResourceID)
		}
	}
	return open, closed
}

// EffectRuledOut reports whether op can have no effect at its provider,
// now or later: no journal event names one, and no request it sent can
// still commit (LateCommitsRuledOut). An absence the provider may still
// overtake (it promises no commit deadline) makes a re-send under the same
// key safe; it never makes giving the fact up safe.
func (op Operation) EffectRuledOut() bool {
	for _, ev := range op.Journal {
		if ev.ResourceID != "" {
			return false
		}
	}
	return op.LateCommitsRuledOut()
}

// LateCommitsRuledOut reports whether no create op sent can still commit:
// every dispatch it was granted either never left (not_dispatched) or was
// searched for and found absent past the provider's promised commit
// horizon (a probe_not_found with LateCommitsBounded, which covers every
// dispatch before it). It says nothing about effects that already exist.
func (op Operation) LateCommitsRuledOut() bool {
	inFlight, mayHaveLeft := false, false
	for _, ev := range op.Journal {
		switch {
		case ev.Type == EventDispatchStarted || ev.Type == EventRetryClaimed:
			inFlight = true
		case ev.Type == EventNotDispatched:
			inFlight = false
		case ev.From == StatePending && ev.To != StatePending:
			// Any other end of the wait: the request may have reached the
			// provider.
			inFlight, mayHaveLeft = false, true
		case ev.Type == EventProbeNotFound && ev.LateCommitsBounded:
			mayHaveLeft = false
		}
	}
	return !inFlight && !mayHaveLeft
}

// EffectFoundBySearch reports whether op SUCCEEDED on an effect found at
// the provider (a probe's one match, or an operator's word), not on the
// answer to a create of its own. The provider keeps no request identity,
// so such an effect may be another request's, a withdrawn one's late
// commit, while op's own create may still be to come.
func (op Operation) EffectFoundBySearch() bool {
	if op.State != StateSucceeded {
		return false
	}
	for i := len(op.Journal) - 1; i >= 0; i-- {
		if ev := op.Journal[i]; ev.To == StateSucceeded && ev.From != StateSucceeded {
			return ev.Type == EventProbeFoundOne || ev.Type == EventOperatorSucceeded
		}
	}
	return false
}

// MayHaveReachedProvider reports whether some dispatch op was granted
// may have left: its wait ended other than by not_dispatched. Only such an
// operation's withdrawal leaves anything for a provider to commit late.
func (op Operation) MayHaveReachedProvider() bool {
	for _, ev := range op.Journal {
		if ev.From == StatePending && ev.To != StatePending && ev.Type != EventNotDispatched {
			return true
		}
	}
	return false
}

// DispatchOutcome is the journal event that ended the wait for the latest
// dispatch (the one that took the operation out of PENDING), if recorded.
func (op Operation) DispatchOutcome() (Event, bool) {
	for i := len(op.Journal) - 1; i >= 0; i-- {
		ev := op.Journal[i]
		if ev.At.Before(op.LastDispatchAt) {
			break
		}
		if ev.From == StatePending && ev.To != StatePending {
			return ev, true
		}
	}
	return Event{}, false
}

// Attempts is the number of dispatches: the first send plus every claimed
// retry (a claim is the only way to send again).
func (op Operation) Attempts() int { return op.RetryCount + 1 }

// Blocked reports whether dependent actions must wait: anything whose effect
// is not proven present blocks them (UNKNOWN is never reported as done),
// and so does a SUCCEEDED whose duplicate audit has not cleared it yet.
func (op Operation) Blocked() bool {
	return op.State != StateSucceeded || op.AuditPending()
}
