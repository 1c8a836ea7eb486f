package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
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

// Resolution is what an operator records: the outcome, the evidence (the
// operator's statement, kept in the journal), and the statements a FAILED
// outcome may need.
type Resolution struct {
	Outcome  string // ResolutionSucceeded or ResolutionFailed
	Evidence string
	// ResourceID is the effect the operator verified (SUCCEEDED), or one
	// the operator knows of (FAILED: then EffectsRemoved is needed).
	ResourceID string
	// EffectsRemoved: the operator states every effect of the operation was
	// removed at the provider.
	EffectsRemoved bool
	// LateCommitsRuledOut: the operator states no request of the operation
	// already sent can still commit at the provider.
	LateCommitsRuledOut bool
}

// Resolve settles an ESCALATED operation of any family on an operator's
// word, checked against the provider: operator_resolved_succeeded or
// operator_resolved_failed, with the operator as actor and the evidence as
// detail. family is the operation's own write tool family; its provider
// does the checks.
//
// A SUCCEEDED resolution must name the resource the operator verified
// (r.ResourceID, or the one already recorded), and the provider must confirm
// it by an authoritative read matching the intended effect: for an incident
// (several effects), it must be one of the matches a fresh search by
// intended effect returns, each confirmed by its own read; otherwise the
// family's read by id (tools.EffectConfirmer) or its probe. Effects the
// provider reports without naming them (tools.ProbeResult.Unnamed) confirm
// none. Where a second effect was not ruled out before the escalation
// (duplicateRisk), a fresh search must also show no effect other than the
// named one. Only then is the effect receipt issued. An operator's word
// alone never makes a receipt.
//
// A FAILED resolution releases the business key (the store does it in the
// same write), so the next request for the same target creates a new
// effect. It is therefore recorded only when a search by intended effect,
// taken now, authoritatively finds no effect, and no request the operation
// sent can still commit: the search covered the provider's promised commit
// horizon, or every dispatch never left (operation.LateCommitsRuledOut);
// otherwise (a provider without a commit deadline) the operator must state
// it (r.LateCommitsRuledOut), as the reconciler would not re-send on that
// search either. When effects were known to exist (an incident, duplicates,
// a recorded or journalled resource, or one the operator names) the
// operator must also state their removal (r.EffectsRemoved). Both
// statements are kept in the journal with the evidence; a resource the
// resolution names stays in the journal, never the failed operation's.
//
// A FAILED operation with an effect reported after it failed is closed
// instead (closeReportedEffects), FAILED staying FAILED.
//
// Errors are *tools.Failure: FORBIDDEN for non-operators, PRECONDITION_FAILED
// when the operation is neither ESCALATED nor FAILED with an effect
// reported after it failed (or moved on meanwhile), when the
// provider does not confirm the named resource, when effects are still
// found (or another effect than the named one), or when a late commit is
// not ruled out; INVALID_ARGUMENT for a bad resolution or evidence
// (control, format or line-separator characters, or the statement marker
// the server's own statements begin with); TEMPORARY_UNAVAILABLE when the
// provider or the store could not be asked, or a search can not yet rule a
// second effect out.
func Resolve(ctx context.Context, ex *tools.Executor, family tools.WriteTool, caller tools.Caller, op operation.Operation, r Resolution) (operation.Operation, error) {
	resolution, evidence, resourceID, effectsRemoved := r.Outcome, r.Evidence, r.ResourceID, r.EffectsRemoved
	if d := policy.CanResolve(caller.Roles); !d.Allow {
		return operation.Operation{}, tools.Fail(tools.CodeForbidden, false, nil, "only operators resolve operations (%s)", d.Reason)
	}
	next := &tools.NextAction{Tool: packet.ToolGetOperation, Arguments: packet.ReadArgs(op),
		Hint: "read the operation's review packet"}
	reported := op.AwaitsOperator()
	if op.State != operation.StateEscalated && !reported {
		return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
			"only ESCALATED operations, and FAILED ones with an effect reported after they failed or a withdrawal audit that could not finish, "+
				"are resolved by an operator; this one is %s", op.State)
	}
	evidence = strings.TrimSpace(evidence)
	if evidence == "" || !utf8.ValidString(evidence) || utf8.RuneCountInString(evidence) > MaxEvidenceRunes {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "evidence must be 1 to %d characters", MaxEvidenceRunes)
	}
	if strings.ContainsFunc(evidence, hiddenOrControl) {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
			"evidence must not contain control, format (bidi, zero-width) or line-separator characters")
	}
	for _, marker := range []string{statementMarker, serverFindingMarker} {
		if strings.Contains(evidence, marker) {
			return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
				"evidence must not contain %q: the journal marks the server's own statements with it", marker)
		}
	}
	if resourceID != "" && !validResourceID(resourceID) {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "resource_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
	}
	if family == nil || family.Name() != op.Key.Tool {
		return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
			"this server cannot reach the provider of %s operations to check a resolution", op.Key.Tool)
	}

	ev := operation.Event{At: ex.Now(), Actor: caller.UserID, Source: SourceOperator, Detail: evidence}
	if reported {
		found, err := closeReportedEffects(ctx, ex, family, op, r, next)
		if err != nil {
			return operation.Operation{}, err
		}
		ev.Type, ev.Result = operation.EventOperatorFailed, "reported_effects_closed"
		if len(op.EffectsReportedAfterFailure()) == 0 {
			ev.Result = "withdrawal_audit_closed"
		}
		ev.Detail += "\n" + ReportedEffectsClosedStatement
		if r.LateCommitsRuledOut {
			ev.Detail += "\n" + LateCommitsRuledOutStatement
		}
		ev.Detail += "\n" + found
		return record(ctx, ex, op, ev, next)
	}
	switch resolution {
	case ResolutionSucceeded:
		if effectsRemoved || r.LateCommitsRuledOut {
			return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
				"effects_removed and late_commits_ruled_out are statements for a FAILED resolution; a SUCCEEDED one keeps an effect")
		}
		if resourceID == "" {
			resourceID = op.ResourceID
		}
		if resourceID == "" {
			return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil,
				"a SUCCEEDED resolution must name the resource (resource_id) the operator verified")
		}
		if err := confirmKept(ctx, ex, family, op, resourceID, next); err != nil {
			return operation.Operation{}, err
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
		bounded, err := confirmAbsent(ctx, ex, family, op, next)
		if err != nil {
			return operation.Operation{}, err
		}
		if !bounded && !op.LateCommitsRuledOut() && !r.LateCommitsRuledOut {
			return operation.Operation{}, tools.Fail(tools.CodePreconditionFailed, false, next,
				"the provider shows no effect now, but a request this operation sent may still commit there (the provider promises no "+
					"commit deadline for it), and FAILED would release the target for another create. Resolve FAILED only once the "+
					"provider confirms no such request can still commit, with late_commits_ruled_out: true")
		}
		ev.Type, ev.Result = operation.EventOperatorFailed, "resolved_failed"
		ev.ResourceID = resourceID
		if effectsRemoved {
			ev.Detail += "\n" + EffectsRemovedStatement
		}
		if r.LateCommitsRuledOut {
			ev.Detail += "\n" + LateCommitsRuledOutStatement
		}
	default:
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "resolution must be SUCCEEDED or FAILED")
	}

	return record(ctx, ex, op, ev, next)
}

// record writes an operator's resolution ev of op.
func record(ctx context.Context, ex *tools.Executor, op operation.Operation, ev operation.Event, next *tools.NextAction) (operation.Operation, error) {
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

// closeReportedEffects checks an operator's closing of the effects reported
// after op FAILED and returns what the server found, for the journal. It
// takes a FAILED resolution stating them dealt with (r.EffectsRemoved) and
// a search, taken now and authoritative, in which every effect left for
// op's fact is the verified effect of the operation holding the fact now
// (a later request for it, whose search by target may have found the very
// effect reported here). Nothing else may be left: closed, op tells its
// callers "failed without effect, ask again". Nor may another request of
// op still commit, which only the operator can state (r.LateCommitsRuledOut):
// the report disproves the journal and the provider's promise alike. The
// journal is told what the search showed for each id. FAILED stays final: a
// SUCCEEDED resolution would need the fact's business key, released when
// op failed, so it is refused with what to do instead.
func closeReportedEffects(ctx context.Context, ex *tools.Executor, family tools.WriteTool, op operation.Operation, r Resolution, next *tools.NextAction) (string, error) {
	ids := op.EffectsReportedAfterFailure()
	// What is open: reported effects, or (with none reported) a withdrawal
	// audit that could not finish, which leaves the operator to search.
	open, gone := "its effect "+strings.Join(ids, ", ")+" was reported", strings.Join(ids, ", ")+" is gone"
	if len(ids) == 0 {
		open, gone = "its withdrawal's audit, which looks for a late commit of it, could not finish; search the provider for its fact",
			"nothing of this operation is left"
	}
	if r.Outcome != ResolutionFailed {
		return "", tools.Fail(tools.CodePreconditionFailed, false, next,
			"this operation FAILED, and then %s; FAILED is final and its business fact was released "+
				"(another operation may hold it now), so it cannot be resolved SUCCEEDED. %s", open, howToClose)
	}
	if r.ResourceID != "" {
		return "", tools.Fail(tools.CodeInvalidArgument, false, nil,
			"closing effects reported after a failure names no resource_id: the server reads what is left from the provider")
	}
	if !r.EffectsRemoved {
		return "", tools.Fail(tools.CodePreconditionFailed, false, next,
			"this operation FAILED, and then %s. %s", open, howToClose)
	}
	holder, err := factHolder(ctx, ex, op)
	if err != nil {
		f := tools.Fail(tools.CodeTemporaryUnavailable, true, next, "the operation holding this fact could not be read; nothing was recorded; resolve again shortly")
		f.Cause = err
		return "", f
	}
	dctx, cancel := ex.Budget().DownstreamContext(ctx)
	defer cancel()
	res, err := family.Probe(dctx, op)
	switch {
	case err != nil:
		f := tools.Fail(tools.CodeTemporaryUnavailable, true, next,
			"the provider could not be asked whether %s; nothing was recorded; resolve again shortly", gone)
		f.Cause = err
		return "", f
	case res.Unnamed:
		return "", tools.Fail(tools.CodePreconditionFailed, false, next,
			"the provider reports effects for this operation without naming them, so it cannot show that %s; nothing was recorded", gone)
	}
	// A holder still due for its duplicate audit has not shown that its
	// effect is its own and the only one: one it found by search may be
	// this operation's late commit while the holder's own create may
	// still land.
	settled := holder.State == operation.StateSucceeded && !holder.AuditPending()
	holdersEffect := func(id string) bool { return settled && id == holder.ResourceID }
	var left []string
	for _, m := range res.Matches {
		if !holdersEffect(m) {
			left = append(left, m)
		}
	}
	switch {
	case len(left) > 0 && holder.Handle != "" && !settled:
		state := string(holder.State)
		if holder.AuditPending() {
			state += ", its duplicate audit not yet done"
		}
		return "", tools.Fail(tools.CodePreconditionFailed, true, next,
			"the provider shows %s for this operation's fact, which may be the effect of %s, the operation holding the fact now (%s): "+
				"do not remove it; close this once that operation has settled; nothing was recorded", strings.Join(left, ", "), holder.Handle, state)
	case len(left) > 0:
		return "", tools.Fail(tools.CodePreconditionFailed, false, next,
			"the provider still shows %s for this operation's fact, and no operation holds it as its verified effect; "+
				"remove it before closing; nothing was recorded", strings.Join(left, ", "))
	case !res.Authoritative:
		return "", tools.Fail(tools.CodePreconditionFailed, true, next,
			"the provider's search cannot yet show that nothing else is left (%s); resolve again later; nothing was recorded", res.Detail)
	case !r.LateCommitsRuledOut:
		// Not the journal's word nor the provider's promise: the reported
		// effect is a request of this operation that committed although
		// the journal, and the promise, said it could not; or the audit
		// that was to check the promise could not.
		why := "the provider committed a request of this operation after it was recorded FAILED"
		if len(ids) == 0 {
			why = "the audit that checks the provider kept its promise for this operation could not finish"
		}
		return "", tools.Fail(tools.CodePreconditionFailed, false, next,
			"%s, so neither the journal nor the provider's "+
				"commit deadline rules out another; close it only once the provider confirms no request of it can still commit, "+
				"with late_commits_ruled_out: true", why)
	}
	found := make([]string, 0, len(ids)+1)
	for _, id := range ids {
		if holdersEffect(id) && slices.Contains(res.Matches, id) {
			found = append(found, id+" is the verified effect of the operation holding the fact now")
		} else {
			found = append(found, id+" is not found at the provider")
		}
	}
	if holder.State == operation.StateSucceeded && holder.ResourceID != "" && !slices.Contains(res.Matches, holder.ResourceID) {
		found = append(found, "the verified effect of the operation holding the fact now is not found at the provider either")
	}
	if len(ids) == 0 {
		what := "nothing is found at the provider for the fact"
		if len(res.Matches) > 0 {
			what = "the provider shows for the fact only the verified effect of the operation holding the fact now"
		}
		found = append([]string{"after a withdrawal audit that could not finish, " + what}, found...)
	}
	// The journal is shown to the operation's owner, who may not see the
	// holder: what the server found names neither its handle nor its effect.
	return serverFindingMarker + " " + strings.Join(found, "; ") + "]", nil
}

// howToClose is what an operator does with an effect reported after a
// failure: it may be the verified effect of the operation holding the fact
// now, found by that operation's own search, and then it stays.
const howToClose = "Unless it is the verified effect of the operation holding the fact now (get_operation names it: then it stays), " +
	"remove it at the provider; then resolve FAILED with effects_removed: true and late_commits_ruled_out: true once the provider " +
	"confirms no request of this operation can still commit"

// factHolder is the operation holding op's business fact now, or a zero
// Operation when none does.
func factHolder(ctx context.Context, ex *tools.Executor, op operation.Operation) (operation.Operation, error) {
	handle, err := ex.Store().BusinessKeyHolder(ctx, op.Key.Tool, op.BusinessKey)
	if errors.Is(err, store.ErrNotFound) {
		return operation.Operation{}, nil
	}
	if err != nil {
		return operation.Operation{}, fmt.Errorf("business key holder: %w", err)
	}
	holder, err := ex.Store().Get(ctx, handle)
	if errors.Is(err, store.ErrNotFound) {
		return operation.Operation{}, nil
	}
	if err != nil {
		return operation.Operation{}, fmt.Errorf("read holder %s: %w", handle, err)
	}
	return holder, nil
}

// serverFindingMarker begins what the server found when it checked an
// operator's closing, appended to the journal detail; an operator's
// evidence may not contain it either.
const serverFindingMarker = "[server found:"

// ReportedEffectsClosedStatement is appended to the journal detail of a
// closing of effects reported after a failure: the operator's statement.
const ReportedEffectsClosedStatement = "[operator states: every effect reported after this operation failed was removed at the provider, or is the effect of the operation holding the fact]"

// hiddenOrControl: characters that would let evidence read otherwise than
// it is stored (control, format such as bidi overrides and zero-width,
// line and paragraph separators); newline and tab are text.
func hiddenOrControl(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// statementMarker begins every statement the server appends to a
// resolution's journal detail; an operator's evidence may not contain it.
const statementMarker = "[operator states:"

// confirmKept asks the provider whether resourceID is op's effect: one of
// the confirmed matches of a fresh search for an incident, else the
// family's authoritative read by id, else one of its probe's matches.
// Where a second effect was not ruled out before op was escalated
// (duplicateRisk), a search must also show resourceID as the only one.
func confirmKept(ctx context.Context, ex *tools.Executor, family tools.WriteTool, op operation.Operation, resourceID string, next *tools.NextAction) error {
	dctx, cancel := ex.Budget().DownstreamContext(ctx)
	defer cancel()
	confirmer, canRead := family.(tools.EffectConfirmer)
	var err error
	if canRead && !incident(op) {
		err = confirmer.Confirm(dctx, op, resourceID)
		if err == nil && duplicateRisk(op) {
			err = onlyEffect(dctx, family, op, resourceID)
		}
	} else {
		var res tools.ProbeResult
		res, err = family.Probe(dctx, op)
		switch {
		case err != nil:
		case res.Unnamed:
			err = fmt.Errorf("the provider reports %d effects without naming them; remove the extra ones at the provider, then resolve with the one kept: %w",
				len(res.Matches), tools.ErrNotConfirmed)
		case !slices.Contains(res.Matches, resourceID):
			err = fmt.Errorf("%s is not among the confirmed matches (%s): %w", resourceID, strings.Join(res.Matches, ", "), tools.ErrNotConfirmed)
		case incident(op) || duplicateRisk(op):
			// An incident's second effect is not merely possible but found:
			// the kept one must be the only one left, not the operator's word
			// that the others were removed.
			err = onlyEffectIn(res, resourceID)
		}
	}
	switch {
	case errors.Is(err, errNotOnlyEffect):
		return tools.Fail(tools.CodePreconditionFailed, false, next,
			"%s; nothing was recorded", strings.TrimSuffix(err.Error(), ": "+errNotOnlyEffect.Error()))
	case errors.Is(err, errNotYetConclusive):
		f := tools.Fail(tools.CodeTemporaryUnavailable, true, next,
			"%s; nothing was recorded; resolve again later", strings.TrimSuffix(err.Error(), ": "+errNotYetConclusive.Error()))
		f.Cause = err
		return f
	case errors.Is(err, tools.ErrNotConfirmed):
		return tools.Fail(tools.CodePreconditionFailed, false, next,
			"the provider does not confirm %s as this operation's intended effect (%v); nothing was recorded", resourceID, err)
	case err != nil:
		f := tools.Fail(tools.CodeTemporaryUnavailable, true, next,
			"the provider could not be asked to confirm %s; nothing was recorded; resolve again shortly", resourceID)
		f.Cause = err
		return f
	}
	return nil
}

// errNotOnlyEffect: a search shows another effect of op than the one an
// operator would keep.
var errNotOnlyEffect = errors.New("not the only effect")

// errNotYetConclusive: the provider answered, but its search cannot yet
// cover every dispatch of op, so it can not rule a second effect out.
var errNotYetConclusive = errors.New("search not yet conclusive")

// duplicateRisk reports whether a second effect of op was not ruled out
// before it was escalated: it was sent more than once, the journal names
// more than one effect, or the duplicate audit that follows a found effect
// did not complete (or the clock skew kept it from being trusted).
func duplicateRisk(op operation.Operation) bool {
	if op.RetryCount > 0 || len(op.EffectEvidence()) > 1 {
		return true
	}
	for _, ev := range op.Journal {
		switch ev.Type {
		case operation.EventAuditExhausted, operation.EventAuditMultiple, operation.EventAuditDeferred, operation.EventClockSkewExceeded:
			return true
		}
	}
	return false
}

// onlyEffect requires a search that covers op's dispatches to show
// resourceID as op's one effect: the duplicate audit an escalation left
// undone, done now.
func onlyEffect(ctx context.Context, family tools.WriteTool, op operation.Operation, resourceID string) error {
	res, err := family.Probe(ctx, op)
	if err != nil {
		return err
	}
	return onlyEffectIn(res, resourceID)
}

// onlyEffectIn requires res, a search covering op's dispatches, to show
// resourceID as op's one effect.
func onlyEffectIn(res tools.ProbeResult, resourceID string) error {
	switch {
	case res.Unnamed || len(res.Matches) > 1:
		return fmt.Errorf("the provider shows %d effects of this operation (%s): an incident; remove the extra ones at the provider, then resolve: %w",
			len(res.Matches), strings.Join(res.Matches, ", "), errNotOnlyEffect)
	case len(res.Matches) == 1 && res.Matches[0] != resourceID:
		return fmt.Errorf("the provider's search shows %s, not %s, as this operation's effect: %w", res.Matches[0], resourceID, errNotOnlyEffect)
	case !res.Authoritative:
		// The index cannot yet rule a second effect out.
		return fmt.Errorf("the provider's search can not yet rule out a second effect (%s): %w", res.Detail, errNotYetConclusive)
	}
	return nil
}

// confirmAbsent asks the provider, by a search for the intended effect,
// whether any effect of op exists now; FAILED needs an authoritative none.
// bounded reports whether that search also covered the provider's promised
// commit horizon, so no create of op can commit after it.
func confirmAbsent(ctx context.Context, ex *tools.Executor, family tools.WriteTool, op operation.Operation, next *tools.NextAction) (bounded bool, err error) {
	dctx, cancel := ex.Budget().DownstreamContext(ctx)
	defer cancel()
	res, err := family.Probe(dctx, op)
	switch {
	case err != nil:
		f := tools.Fail(tools.CodeTemporaryUnavailable, true, next,
			"the provider could not be searched for this operation's effects; nothing was recorded; resolve again shortly")
		f.Cause = err
		return false, f
	case len(res.Matches) > 0:
		return false, tools.Fail(tools.CodePreconditionFailed, false, next,
			"the provider still shows effects of this operation (%s); remove them before resolving FAILED, or resolve SUCCEEDED keeping one",
			strings.Join(res.Matches, ", "))
	case !res.Authoritative:
		return false, tools.Fail(tools.CodePreconditionFailed, true, next,
			"the provider's search cannot yet prove that no effect exists (%s); resolve again later", res.Detail)
	}
	// A bounded answer that is not a search (a provider that deduplicates
	// by our request key: no watermark) is what the duplicate audit skips too.
	searched := !res.IndexedThrough.IsZero() && !family.Recovery().IdempotentCreate
	if horizon, ok := op.CommitHorizon(); ok && searched && res.LateCommitsBounded && op.MayHaveReachedProvider() {
		// FAILED releases the fact on the provider's promise, as a
		// withdrawal does, but nothing audits it afterwards: so it waits,
		// as a withdrawal's audit does, for a search that covers the
		// horizon and the grace of a provider that breaks its promise by
		// less. A late commit is then there to be found.
		if cover := ex.AuditCoverage(op); res.IndexedThrough.Before(cover) {
			return false, tools.Fail(tools.CodeTemporaryUnavailable, true, next,
				"the provider shows no effect of this operation in what it has indexed (through %s), but a request it sent may still "+
					"commit there until %s (its commit horizon %s plus a grace of %s for a provider that breaks its promise by less), "+
					"and FAILED would release the target for another create; nothing was recorded; resolve again after %s",
				res.IndexedThrough.UTC().Format(time.RFC3339), cover.UTC().Format(time.RFC3339), horizon.UTC().Format(time.RFC3339),
				ex.AuditGrace(), cover.UTC().Format(time.RFC3339))
		}
	}
	return res.LateCommitsBounded, nil
}

// incident: the operation is known to have produced more than one effect.
func incident(op operation.Operation) bool {
	return op.Outcome == operation.OutcomeIncidentMultipleEffects || op.DuplicateResources > 0
}

// EffectsRemovedStatement is appended to the journal detail of a FAILED
// resolution given with effects_removed: the operator's own statement.
const EffectsRemovedStatement = "[operator states: all effects of this operation were removed at the provider]"

// LateCommitsRuledOutStatement is appended to the journal detail of a
// FAILED resolution given with late_commits_ruled_out.
const LateCommitsRuledOutStatement = "[operator states: no request of this operation already sent can still commit at the provider]"

// knownEffects: the operation is known to have produced at least one effect.
func knownEffects(op operation.Operation, resourceID string) bool {
	return op.DuplicateResources > 0 || op.Outcome == operation.OutcomeIncidentMultipleEffects ||
		op.ResourceID != "" || resourceID != "" || len(op.EffectEvidence()) > 0
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
	if evidence := op.EffectEvidence(); len(evidence) > 0 {
		parts = append(parts, "journalled effects "+strings.Join(evidence, ", "))
	}
	return strings.Join(parts, "; ")
}

// resourceIDPattern and maxResourceIDLength bound an operator-named
// resource id: 1-128 of these characters, as the input schema states it.
// validResourceID checks it without a compiled expression, which would
// cost every cold start at package init; a test keeps the two equal.
const resourceIDPattern = `^[A-Za-z0-9._:-]+$`

const maxResourceIDLength = 128

func validResourceID(id string) bool {
	if id == "" || len(id) > maxResourceIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}
