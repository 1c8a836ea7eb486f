package operation

import "time"

// EventType names something that happened to an operation. Transition
// events move the state machine; the journal keeps every one of them.
type EventType string

// Transition events. Each is legal from exactly the states listed in Next.
const (
	// Recorded in the insert that creates the operation (PENDING).
	EventIntentRecorded EventType = "intent_recorded"
	// Recorded in the same write that grants the right to dispatch (the
	// insert or the winning claim), so the journal says a call may be in
	// flight before the call is made.
	EventDispatchStarted EventType = "provider_dispatch_started"

	EventCreateSucceeded  EventType = "create_succeeded"          // PENDING -> SUCCEEDED
	EventBusinessRejected EventType = "business_rejected"         // PENDING -> FAILED
	EventNotDispatched    EventType = "not_dispatched"            // PENDING -> RETRYABLE (connection refused: proven no effect)
	EventClientTimeout    EventType = "client_timeout"            // PENDING -> UNKNOWN (our wait for the provider ended)
	EventResponseMissing  EventType = "response_missing"          // PENDING -> UNKNOWN (reset, 5xx, undecodable answer)
	EventVerifyFailed     EventType = "verification_inconclusive" // PENDING -> UNKNOWN (created, but the authoritative read did not confirm)
	EventDispatcherLost   EventType = "dispatcher_lost"           // PENDING -> UNKNOWN (lease expired)

	EventProbeFoundOne        EventType = "probe_found_one"        // UNKNOWN -> SUCCEEDED
	EventProbeNotFound        EventType = "probe_not_found"        // UNKNOWN -> RETRYABLE (authoritative, after the settle window)
	EventProbeInconclusive    EventType = "probe_inconclusive"     // UNKNOWN -> UNKNOWN
	EventProbeMultiple        EventType = "probe_multiple_effects" // UNKNOWN -> ESCALATED (incident)
	EventProbeBudgetExhausted EventType = "probe_budget_exhausted" // UNKNOWN -> ESCALATED (operator)

	EventRetryClaimed         EventType = "retry_claimed"          // RETRYABLE -> PENDING
	EventRetryBudgetExhausted EventType = "retry_budget_exhausted" // RETRYABLE -> ESCALATED
	// EventClientCancelled: the caller withdrew an intent while it was
	// proven unsent (RETRYABLE, unclaimed). Version-conditioned like every
	// transition, so a claim that won first makes the cancel stale, and a
	// cancel that won first leaves nothing for a reconciler to re-send.
	EventClientCancelled EventType = "client_cancelled" // RETRYABLE -> FAILED

	EventOperatorSucceeded EventType = "operator_resolved_succeeded" // ESCALATED -> SUCCEEDED
	EventOperatorFailed    EventType = "operator_resolved_failed"    // ESCALATED -> FAILED; FAILED -> FAILED closes effects reported after failure

	// A provider without request idempotency and without a bound on late
	// commits: proven absence is not enough to send again.
	EventResendUnsafe EventType = "resend_unsafe" // UNKNOWN -> ESCALATED
	// Two clocks disagree by more than the configured skew bound, so no
	// timestamp comparison between them may decide anything.
	EventClockSkewExceeded EventType = "clock_skew_exceeded" // UNKNOWN, SUCCEEDED -> ESCALATED

	// The duplicate audit: after a re-send, once the provider's commit
	// horizon has passed, one more search by intended effect. A withdrawn
	// operation (client_cancelled) is audited the same way and stays
	// FAILED: an effect the audit finds is journalled as evidence
	// (EffectsReportedAfterFailure), and an audit that cannot complete is
	// an operator's to look at.
	EventAuditClean     EventType = "duplicate_audit_clean"            // SUCCEEDED -> SUCCEEDED, FAILED -> FAILED (audit done)
	EventAuditDeferred  EventType = "duplicate_audit_deferred"         // SUCCEEDED -> SUCCEEDED, FAILED -> FAILED (horizon not indexed yet)
	EventAuditMultiple  EventType = "duplicate_audit_multiple_effects" // SUCCEEDED -> ESCALATED (incident)
	EventAuditExhausted EventType = "duplicate_audit_exhausted"        // SUCCEEDED -> ESCALATED, FAILED -> FAILED (operator)

	// A dispatcher that lost its lease or a race while holding verified
	// evidence (a created resource id) journals it on the current version;
	// the state does not change, but the duplicate audit counts the id. On
	// a FAILED operation it is the only record that an effect exists after
	// all (EffectsReportedAfterFailure).
	EventEvidenceRecorded EventType = "dispatch_evidence_recorded" // any state -> same
)

// TransitionEvents lists every event that moves the state machine.
func TransitionEvents() []EventType {
	return []EventType{
		EventCreateSucceeded, EventBusinessRejected, EventNotDispatched, EventClientTimeout,
		EventResponseMissing, EventVerifyFailed, EventDispatcherLost,
		EventProbeFoundOne, EventProbeNotFound, EventProbeInconclusive, EventProbeMultiple,
		EventProbeBudgetExhausted, EventRetryClaimed, EventRetryBudgetExhausted, EventClientCancelled,
		EventOperatorSucceeded, EventOperatorFailed,
		EventResendUnsafe, EventClockSkewExceeded,
		EventAuditClean, EventAuditDeferred, EventAuditMultiple, EventAuditExhausted,
		EventEvidenceRecorded,
	}
}

// Next is the transition table of docs/design.md (State machine), extended
// by two PENDING exits the design implies: not_dispatched (a refused connection proves the
// request never left, so only a reconciler claim may re-send it) and
// verification_inconclusive (a success-shaped answer we could not confirm).
func Next(from State, ev EventType) (State, bool) {
	if ev == EventEvidenceRecorded {
		// Evidence never moves the state. A FAILED operation takes it too:
		// its business key is gone and cannot be taken back, but a verified
		// effect the provider reported must not be dropped unrecorded.
		if !from.Valid() {
			return "", false
		}
		return from, true
	}
	switch from {
	case StatePending:
		switch ev {
		case EventCreateSucceeded:
			return StateSucceeded, true
		case EventBusinessRejected:
			return StateFailed, true
		case EventNotDispatched:
			return StateRetryable, true
		case EventClientTimeout, EventResponseMissing, EventVerifyFailed, EventDispatcherLost:
			return StateUnknown, true
		}
	case StateUnknown:
		switch ev {
		case EventProbeFoundOne:
			return StateSucceeded, true
		case EventProbeNotFound:
			return StateRetryable, true
		case EventProbeInconclusive:
			return StateUnknown, true
		case EventProbeMultiple, EventProbeBudgetExhausted, EventResendUnsafe, EventClockSkewExceeded:
			return StateEscalated, true
		}
	case StateSucceeded:
		switch ev {
		case EventAuditClean, EventAuditDeferred:
			return StateSucceeded, true
		case EventAuditMultiple, EventAuditExhausted, EventClockSkewExceeded:
			return StateEscalated, true
		}
	case StateRetryable:
		switch ev {
		case EventRetryClaimed:
			return StatePending, true
		case EventRetryBudgetExhausted:
			return StateEscalated, true
		case EventClientCancelled:
			return StateFailed, true
		}
	case StateEscalated:
		switch ev {
		case EventOperatorSucceeded:
			return StateSucceeded, true
		case EventOperatorFailed:
			return StateFailed, true
		}
	case StateFailed:
		// FAILED is final; an operator's statement that the effects
		// reported after it were removed only closes them (Apply: only
		// when there are some), and a withdrawal's audit only looks
		// (Apply: only while one is pending).
		switch ev {
		case EventOperatorFailed, EventAuditClean, EventAuditDeferred, EventAuditExhausted:
			return StateFailed, true
		}
	}
	return "", false
}

// defaultOutcome is what a caller is told after the event, unless the event
// carries a more precise one (an inconclusive probe says why).
func defaultOutcome(ev EventType, previous Outcome) Outcome {
	switch ev {
	case EventCreateSucceeded, EventProbeFoundOne, EventOperatorSucceeded:
		return OutcomeCommittedAndVerified
	case EventBusinessRejected, EventNotDispatched, EventProbeNotFound, EventOperatorFailed, EventClientCancelled:
		return OutcomeFailedWithoutEffect
	case EventClientTimeout, EventResponseMissing, EventDispatcherLost:
		return OutcomeResponseMissing
	case EventVerifyFailed:
		return OutcomeVerificationInconclusive
	case EventProbeInconclusive:
		return OutcomeProviderStatusUnavailable
	case EventProbeMultiple, EventAuditMultiple:
		return OutcomeIncidentMultipleEffects
	case EventAuditExhausted:
		return OutcomeVerificationInconclusive
	case EventRetryClaimed:
		return OutcomePending
	}
	return previous // budget exhaustion keeps the reason we could not decide
}

// Event is one journal entry: what happened, when, and the evidence. The
// optional fields carry what the transition records on the operation.
type Event struct {
	Type   EventType `json:"type"`
	At     time.Time `json:"at"`
	From   State     `json:"from,omitempty"`
	To     State     `json:"to,omitempty"`
	Detail string    `json:"detail,omitempty"`
	// Source and Result describe a reconciliation check (docs/design.md,
	// Review packet):
	// e.g. source release_provider, result one_exact_match.
	Source string `json:"source,omitempty"`
	Result string `json:"result,omitempty"`
	Actor  string `json:"actor,omitempty"`

	ResourceID string    `json:"resource_id,omitempty"`
	Receipt    string    `json:"receipt,omitempty"`
	Duplicates int       `json:"duplicates,omitempty"`
	NextAt     time.Time `json:"next_at,omitzero"`     // next probe or next_retry_at
	LeaseUntil time.Time `json:"lease_until,omitzero"` // PENDING lease after a claim
	Outcome    Outcome   `json:"outcome,omitempty"`
	// CommitDeadline is recorded by the write that grants a dispatch (the
	// insert's provider_dispatch_started, a retry_claimed): the instant
	// after which the provider promises not to commit that dispatch. It is
	// journalled before the request leaves, so whoever probes later knows
	// the horizon even if the dispatcher died.
	CommitDeadline time.Time `json:"commit_deadline,omitzero"`
	// LateCommitsBounded marks a probe_not_found whose search covered the
	// provider's promised commit horizon of every dispatch: no create of
	// the operation can commit after it, so the absence is final, not only
	// a reason to re-send under the same key (see EffectRuledOut).
	LateCommitsBounded bool `json:"late_commits_bounded,omitempty"`
	// WriteID is unique per attempted write. A writer whose write was
	// applied but whose answer was lost recognises it by this id, where two
	// workers that computed the same event at the same instant would not.
	WriteID string `json:"write_id,omitempty"`
}
