package release

import (
	"context"
	"errors"
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
// could never tell which effect was meant. A FAILED resolution releases the
// business key (the store does it in the same write).
//
// Errors are *tools.Failure: FORBIDDEN for non-operators, PRECONDITION_FAILED
// when the operation is not ESCALATED (or moved on meanwhile),
// INVALID_ARGUMENT for a bad resolution or evidence, TEMPORARY_UNAVAILABLE
// when the store could not be written.
func Resolve(ctx context.Context, ex *tools.Executor, caller tools.Caller, op operation.Operation, resolution, evidence, resourceID string) (operation.Operation, error) {
	if d := policy.CanResolve(caller.Roles); !d.Allow {
		return operation.Operation{}, tools.Fail(tools.CodeForbidden, false, nil, "only operators resolve operations (%s)", d.Reason)
	}
	next := &tools.NextAction{Tool: packet.ToolGetOperation, Arguments: map[string]string{"operation_id": op.Key.OperationID},
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
		ev.Type, ev.Result = operation.EventOperatorFailed, "resolved_failed"
		ev.ResourceID = resourceID
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

var resourceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func validResourceID(id string) bool { return resourceIDPattern.MatchString(id) }
