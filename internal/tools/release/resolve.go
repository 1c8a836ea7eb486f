package release

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Resolutions an operator may record.
const (
	ResolutionSucceeded = "SUCCEEDED"
	ResolutionFailed    = "FAILED"
)

// MaxEvidenceRunes bounds the operator's evidence statement.
const MaxEvidenceRunes = 1000

// SourceOperator is the journal source of an operator resolution.
const SourceOperator = "operator"

// Resolve settles an ESCALATED operation of any family on an operator's
// word: operator_resolved_succeeded or operator_resolved_failed, with the
// operator as actor and the evidence (an operator's statement, kept in the
// journal) as detail. A SUCCEEDED resolution must name the resource the
// operator verified (resourceID, or the one already recorded) and issues
// the effect receipt for it; without a named resource a dependent action
// could never tell which effect was meant.
//
// A FAILED resolution releases the business key (the store does it in the
// same write), so the next request for the same target creates a new
// effect. When effects are known to exist (an incident_multiple_effects
// escalation, duplicate resources, a recorded resource_id, or one the
// operator names) FAILED is therefore refused unless effectsRemoved: the
// operator states the effects were removed at the provider. That statement
// is kept in the journal with the evidence.
//
// Errors are *tools.Failure: FORBIDDEN for non-operators, PRECONDITION_FAILED
// when the operation is not ESCALATED (or moved on meanwhile) or a FAILED
// resolution would release a key whose effects still exist,
// INVALID_ARGUMENT for a bad resolution or evidence, TEMPORARY_UNAVAILABLE
// when the store could not be written.
func Resolve(ctx context.Context, ex *tools.Executor, caller tools.Caller, op operation.Operation,
	resolution, evidence, resourceID string, effectsRemoved bool) (operation.Operation, error) {
	if d := policy.CanResolve(caller.Roles); !d.Allow {
		return operation.Operation{}, tools.Fail(tools.CodeForbidden, false, nil, "only operators resolve operations (%s)", d.Reason)
	}
	next := &tools.NextAction{Tool: packet.ToolGetOperation, Arguments: packet.ReadArgs(op, caller),
		Hint: "read the operation's review packet"}
	if op.State != operation.StateEscalated {
		return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
			"only ESCALATED operations are resolved by an operator; this one is %s", op.State)
	}
	evidence = strings.TrimSpace(evidence)
	if evidence == "" || !utf8.ValidString(evidence) || utf8.RuneCountInString(evidence) > MaxEvidenceRunes {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "evidence must be 1 to %d characters", MaxEvidenceRunes)
	}
	if strings.ContainsFunc(evidence, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "evidence must not contain control characters")
	}
	if resourceID != "" && !validResourceID(resourceID) {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "resource_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
	}

	ev := operation.Event{At: ex.Now(), Actor: caller.UserID, Source: SourceOperator, Detail: evidence}
	switch resolution {
	case ResolutionSucceeded:
		if effectsRemoved {
			return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
				"effects_removed contradicts a SUCCEEDED resolution, which keeps an effect; use it only with FAILED")
		}
		if resourceID == "" {
			resourceID = op.ResourceID
		}
		if resourceID == "" {
			return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
				"a SUCCEEDED resolution must name the resource (resource_id) the operator verified")
		}
		ev.Type, ev.Result = operation.EventOperatorSucceeded, "resolved_succeeded"
		ev.ResourceID, ev.Receipt = resourceID, tools.Receipt(op.Handle, resourceID)
	case ResolutionFailed:
		if knownEffects(op, resourceID) && !effectsRemoved {
			return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
				"effects of this operation exist (%s); FAILED would release the target and the next request would create another. "+
					"Resolve SUCCEEDED with the resource_id to keep, or remove the effects at the provider and resolve FAILED with effects_removed: true",
				effectsSummary(op, resourceID))
		}
		ev.Type, ev.Result = operation.EventOperatorFailed, "resolved_failed"
		ev.ResourceID = resourceID
		if effectsRemoved {
			ev.Detail = evidence + "\n" + EffectsRemovedStatement
		}
	default:
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "resolution must be SUCCEEDED or FAILED")
	}

	settled, err := ex.Transition(ctx, op.Key.Tool, op, ev, nil)
	switch {
	case errors.Is(err, store.ErrStale):
		return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
			"the operation changed while it was being resolved (now %s); read it again", settled.State)
	case err != nil:
		return operation.Operation{}, tools.Fail(tools.CodeTemporaryUnavailable, true, next,
			"the resolution could not be recorded; read the operation before resolving again")
	}
	return settled, nil
}

// EffectsRemovedStatement is appended to the journal detail of a FAILED
// resolution given with effects_removed: the operator's own statement.
const EffectsRemovedStatement = "[operator states: all effects of this operation were removed at the provider]"

// knownEffects: the operation is known to have produced at least one effect.
func knownEffects(op operation.Operation, resourceID string) bool {
	return op.DuplicateResources > 0 || op.Outcome == operation.OutcomeIncidentMultipleEffects ||
		op.ResourceID != "" || resourceID != ""
}

func effectsSummary(op operation.Operation, resourceID string) string {
	var parts []string
	if op.Outcome == operation.OutcomeIncidentMultipleEffects || op.DuplicateResources > 0 {
		parts = append(parts, fmt.Sprintf("incident with %d matching resources", op.DuplicateResources))
	}
	if op.ResourceID != "" {
		parts = append(parts, "recorded resource "+op.ResourceID)
	}
	if resourceID != "" && resourceID != op.ResourceID {
		parts = append(parts, "named resource "+resourceID)
	}
	return strings.Join(parts, "; ")
}

var resourceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func validResourceID(id string) bool { return resourceIDPattern.MatchString(id) }
