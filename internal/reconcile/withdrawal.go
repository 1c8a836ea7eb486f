package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// ResultNotHeld: the audit of a withdrawal found an effect that no
// operation on the fact accounts for.
const ResultNotHeld = "match_not_held"

// withdrawalAudit is the duplicate audit of a withdrawn operation. The
// withdrawal (tasks/cancel) released the fact on the provider's promise
// that nothing op sent commits past its horizon. A provider that breaks
// it commits an effect nobody holds, and the next request for the fact
// makes another. So once the provider's index covers the horizon and the
// audit's grace, the withdrawn operation is searched for as a re-send is:
// a match nothing accounts for is journalled on it as evidence after
// failure. It stays FAILED (its task was told cancelled);
// EffectsReportedAfterFailure is the incident an operator closes.
//
// The search returns every effect on the target, and the provider keeps
// no request identity, so a match is the withdrawn operation's only if
// the fact's present holder does not name it. While the holder still
// waits on its own dispatch an unnamed match may be its create, and the
// audit waits for it; past the probe budget the match is reported anyway,
// for an operator to tell (a false report costs an operator a look; a
// missed one costs a duplicate).
func (s *Service) withdrawalAudit(ctx context.Context, family tools.WriteTool, op operation.Operation, now time.Time, res Result) (Result, error) {
	rec := family.Recovery()
	tooOld := rec.MaxAge > 0 && now.Sub(op.CreatedAt) > rec.MaxAge
	before := now
	answer, asked, err := s.search(ctx, family, op, tooOld, "withdrawal audit", &res)
	if !asked {
		return res, err
	}
	found, err := answer.found, answer.err
	var holder operation.Operation
	if err == nil {
		var herr error
		if holder, herr = s.factHolder(ctx, op); herr != nil {
			// Matches cannot be told from the holder's own without it. A
			// holder nobody can read spends the audit's searches like a
			// failed lookup, so it ends with an operator, not in an error
			// on every sweep. The read's error names the holder, which the
			// journal must not (holderNote): it goes to the log.
			s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "withdrawal audit: the fact's holder could not be read",
				slog.String("handle", op.Handle), slog.String("error", herr.Error()))
			found, err = tools.ProbeResult{Source: found.Source}, errHolderUnreadable
		}
	}
	now = s.cfg.Executor.Now()
	source := found.Source
	if source == "" {
		source = family.Name()
	}
	unheld := notHeld(found.Matches, op.EffectEvidence(), holder.EffectEvidence())
	holderWaiting := holder.Handle != "" && holder.State.NeedsReconciliation()
	coverage, horizonOf := s.cfg.Executor.AuditCoverage(op), "the commit horizon"
	if holder.EffectFoundBySearch() && holder.MayHaveReachedProvider() {
		// The holder took an effect it found, which may be op's late
		// commit, while its own create may still land: the audit covers
		// the holder's horizon and grace too.
		if hc := s.cfg.Executor.AuditCoverage(holder); hc.After(coverage) {
			coverage, horizonOf = hc, "the commit horizon of the operation holding the fact now, which took an effect it found,"
		}
	}
	covered := err == nil && found.Authoritative && found.LateCommitsBounded && !found.IndexedThrough.Before(coverage)
	exhausted := tooOld || auditPasses(op, operation.StateFailed)+1 >= rec.ProbeBudget
	reported := len(op.EffectsReportedAfterFailure()) + len(op.EffectsClosedAfterFailure())

	var ev operation.Event
	switch why := s.skewExceeded(op, found, before, now); {
	case len(unheld) > 0 && holderWaiting && !exhausted:
		ev = s.withdrawalAuditDeferred(op, source, found, nil, coverage, horizonOf, now,
			fmt.Sprintf("%s on the target not named by the operation holding the fact now, which is still %s: it may be that operation's own",
				strings.Join(unheld, ", "), holder.State))
	case len(unheld) > 0 && reported < op.Attempts():
		// One effect per pass and at most one per dispatch op made: the
		// journal stays bounded, and more is an operator's question.
		next := time.Time{}
		if len(unheld) > 1 || !covered {
			next = now
		}
		ev = operation.Event{Type: operation.EventEvidenceRecorded, Source: source, Result: ResultNotHeld,
			ResourceID: unheld[0], NextAt: next, Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("withdrawal audit: %s exists at the provider and no operation on the fact names it: "+
				"the withdrawn request committed after all; reported to %s, do not ask for the fact again until it is closed%s",
				unheld[0], s.cfg.Operator, holderNote(holder))}
	case len(unheld) > 0:
		ev = operation.Event{Type: operation.EventAuditExhausted, Source: source, Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: withdrawal audit found %s besides the %d effect(s) already reported, more than the operation's %d dispatch(es) could make%s",
				s.cfg.Operator, strings.Join(unheld, ", "), reported, op.Attempts(), holderNote(holder))}
	case why != "":
		ev = operation.Event{Type: operation.EventAuditExhausted, Source: "reconciler", Actor: s.cfg.Operator,
			Detail: fmt.Sprintf("escalated to %s: withdrawal audit impossible: %s", s.cfg.Operator, why)}
	case covered:
		ev = operation.Event{Type: operation.EventAuditClean, Source: source, Result: ResultNotFound,
			Detail: joinDetail(found.Detail, "withdrawal audit clean: nothing of the withdrawn request past the commit horizon and the audit's grace"+holderNote(holder))}
	case exhausted:
		detail := fmt.Sprintf("escalated to %s: withdrawal audit could not complete after %d searches", s.cfg.Operator, auditPasses(op, operation.StateFailed)+1)
		if err != nil {
			detail = joinDetail(detail, "lookup failed: "+tools.ErrorDetail(err))
		}
		ev = operation.Event{Type: operation.EventAuditExhausted, Source: source, Actor: s.cfg.Operator, Detail: detail}
	default:
		ev = s.withdrawalAuditDeferred(op, source, found, err, coverage, horizonOf, now, "")
	}
	ev.At = now
	return s.decide(ctx, family, op, ev, res)
}

// errHolderUnreadable is what the withdrawn operation's journal says of a
// holder read that failed.
var errHolderUnreadable = errors.New("the operation holding the fact could not be read")

// withdrawalAuditDeferred schedules the next search: after the backoff,
// and not before the provider's index can cover the audit's reach.
func (s *Service) withdrawalAuditDeferred(op operation.Operation, source string, found tools.ProbeResult, err error, coverage time.Time, horizonOf string, now time.Time, why string) operation.Event {
	detail, readyIn := found.Detail, found.ReadyIn
	if err != nil {
		detail = "lookup failed: " + tools.ErrorDetail(err)
	} else if found.IndexedThrough.Before(coverage) {
		readyIn = max(readyIn, coverage.Sub(found.IndexedThrough))
		detail = joinDetail(detail, fmt.Sprintf("the index must reach %s (%s plus the audit's grace %s)",
			coverage.UTC().Format(time.RFC3339Nano), horizonOf, s.cfg.Executor.AuditGrace()))
	}
	next := now.Add(s.wait(auditPasses(op, operation.StateFailed)))
	if ready := now.Add(min(readyIn, backoffCap)); ready.After(next) {
		next = ready
	}
	return operation.Event{Type: operation.EventAuditDeferred, Source: source, Result: ResultNotFoundUnproven, NextAt: next,
		Detail: joinDetail(joinDetail(detail, why), "withdrawal audit not yet conclusive")}
}

// factHolder is the operation holding op's business fact now, or the zero
// Operation when the fact is free.
func (s *Service) factHolder(ctx context.Context, op operation.Operation) (operation.Operation, error) {
	handle, err := s.st.BusinessKeyHolder(ctx, op.Key.Tool, op.BusinessKey)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && (handle == "" || handle == op.Handle):
		return operation.Operation{}, nil
	case err != nil:
		return operation.Operation{}, fmt.Errorf("read the fact's holder: %w", err)
	}
	holder, err := s.st.Get(ctx, handle)
	if errors.Is(err, store.ErrNotFound) {
		// Released and expired since the key was read: it holds nothing.
		return operation.Operation{}, nil
	}
	if err != nil {
		return operation.Operation{}, fmt.Errorf("read the fact's holder %s: %w", handle, err)
	}
	return holder, nil
}

// auditPasses counts the searches an audit of op deferred so far from
// state from (SUCCEEDED: the duplicate audit; FAILED: a withdrawal's): its
// own budget, apart from the probes before it. A ticket a probe found
// after searches the provider hid must not leave its audit without room
// for one more.
func auditPasses(op operation.Operation, from operation.State) int {
	n := 0
	for _, ev := range op.Journal {
		if ev.From == from && ev.Type == operation.EventAuditDeferred {
			n++
		}
	}
	return n
}

// notHeld lists the matches neither list names.
func notHeld(matches, own, holder []string) []string {
	var out []string
	for _, id := range matches {
		if !slices.Contains(own, id) && !slices.Contains(holder, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// holderNote says what the operation holding the fact is, for the
// withdrawn operation's journal. Not its handle nor its effects: the
// journal is shown to the withdrawn operation's owner, who may not see the
// holder (another team granted the service); operators find it by the fact.
func holderNote(holder operation.Operation) string {
	if holder.Handle == "" {
		return "; the fact is not held by any operation"
	}
	switch named := len(holder.EffectEvidence()) > 0; {
	case named && holder.EffectFoundBySearch():
		return fmt.Sprintf("; the operation holding the fact now (%s) names an effect it found by search: either effect may be the withdrawn request's",
			holder.State)
	case named:
		return fmt.Sprintf("; the operation holding the fact now (%s) names its own effect", holder.State)
	}
	return fmt.Sprintf("; the operation holding the fact now is %s", holder.State)
}
