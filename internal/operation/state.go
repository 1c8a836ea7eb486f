package operation

// State is where an operation stands. PENDING and UNKNOWN are not failures:
// PENDING has a dispatcher holding a lease; UNKNOWN means the downstream may
// have executed and we lack the proof either way.
type State string

// The states of the state machine (docs/design.md, State machine).
const (
	StatePending   State = "PENDING"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateUnknown   State = "UNKNOWN"
	StateRetryable State = "RETRYABLE"
	StateEscalated State = "ESCALATED"
)

// AllStates lists every state, for exhaustive tests and schema enums.
func AllStates() []State {
	return []State{StatePending, StateSucceeded, StateFailed, StateUnknown, StateRetryable, StateEscalated}
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, known := range AllStates() {
		if s == known {
			return true
		}
	}
	return false
}

// NeedsReconciliation reports whether an operation in this state is work for
// the reconciler: a PENDING lease that may expire, an UNKNOWN to probe, a
// RETRYABLE to claim. Only these carry the sparse index attributes.
func (s State) NeedsReconciliation() bool {
	return s == StatePending || s == StateUnknown || s == StateRetryable
}

// Settled reports whether the outcome is final without an operator.
func (s State) Settled() bool {
	return s == StateSucceeded || s == StateFailed
}

// Outcome is the vocabulary shown to callers (docs/design.md, Review
// packet): what we know about
// the effect, as opposed to where the state machine stands.
type Outcome string

// Known and unknown outcomes. OutcomePending is not an outcome yet: a
// dispatcher holds the lease and has not reported.
const (
	OutcomeCommittedAndVerified      Outcome = "committed_and_verified"
	OutcomeFailedWithoutEffect       Outcome = "failed_without_effect"
	OutcomeRejectedBeforeDispatch    Outcome = "rejected_before_dispatch"
	OutcomeResponseMissing           Outcome = "dispatch_acknowledged_response_missing"
	OutcomeProviderStatusUnavailable Outcome = "provider_status_unavailable"
	OutcomeVerificationInconclusive  Outcome = "verification_inconclusive"
	OutcomeIncidentMultipleEffects   Outcome = "incident_multiple_effects"
	OutcomePending                   Outcome = "pending"
)

// AllOutcomes lists every outcome, for exhaustive tests and schema enums.
func AllOutcomes() []Outcome {
	return []Outcome{OutcomeCommittedAndVerified, OutcomeFailedWithoutEffect, OutcomeRejectedBeforeDispatch,
		OutcomeResponseMissing, OutcomeProviderStatusUnavailable, OutcomeVerificationInconclusive,
		OutcomeIncidentMultipleEffects, OutcomePending}
}

// Known reports whether the outcome is a proven fact (the effect exists, or
// provably does not).
func (o Outcome) Known() bool {
	switch o {
	case OutcomeCommittedAndVerified, OutcomeFailedWithoutEffect, OutcomeRejectedBeforeDispatch:
		return true
	}
	return false
}
