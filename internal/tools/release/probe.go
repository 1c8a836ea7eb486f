package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// CommitAllowance is added to the end of the dispatch wait before a search
// watermark may prove absence. It covers clock skew between this server and
// the provider and a create the provider commits just after our client gave
// up waiting.
const CommitAllowance = time.Second

// Probe reconciles by intended effect (the provider has no key lookup):
// search for tickets with exactly this target and confirm every hit with
// the authoritative read.
//
// The answer is authoritative only when the search is complete and its
// watermark covers the whole dispatch: not just the moment it started (a
// slow provider can commit later than that) but the moment our wait ended,
// plus CommitAllowance. A hit the authoritative read denies is dropped and
// makes the answer non-authoritative. A hit that could not be read makes
// the whole probe fail: dropping it could hide a second ticket.
func (f *Family) Probe(ctx context.Context, op operation.Operation) (tools.ProbeResult, error) {
	target := targetOf(op)
	query := fmt.Sprintf("search service=%s commit=%s environment=%s", target.Service, target.Commit, target.Environment)
	found, err := f.api.SearchTickets(ctx, target)
	if err != nil {
		return tools.ProbeResult{}, fmt.Errorf("%s: %w", query, err)
	}
	res := tools.ProbeResult{Source: ProbeSource, Matches: []string{}, ProviderTime: found.SearchedAt}
	dropped := 0
	// Every id the journal names as an effect (e.g. evidence a stale
	// dispatcher recorded) counts too, even if the index lags behind it.
	candidates := make([]string, 0, len(found.Tickets))
	seen := map[string]bool{}
	for _, t := range found.Tickets {
		if !seen[t.TicketID] {
			seen[t.TicketID] = true
			candidates = append(candidates, t.TicketID)
		}
	}
	searched := len(candidates)
	for _, id := range op.EffectEvidence() {
		if !seen[id] {
			seen[id] = true
			candidates = append(candidates, id)
		}
	}
	for i, id := range candidates {
		if _, err := f.confirm(ctx, op, id); err != nil {
			if errors.Is(err, ErrNotConfirmed) {
				// A search hit the read denies makes the index suspect; a
				// journalled id the read denies is simply not an effect.
				if i < searched {
					dropped++
				}
				continue
			}
			return tools.ProbeResult{}, fmt.Errorf("%s: confirm %s: %w", query, id, err)
		}
		res.Matches = append(res.Matches, id)
	}
	coverBy := CoverThrough(op)
	horizon, bounded := op.CommitHorizon()
	bounded = bounded && f.recovery.CommitDeadline
	if bounded {
		// The provider promised, by its own clock, never to commit any of
		// op's creates after the horizon; its watermark is that clock too.
		coverBy = later(coverBy, horizon)
	}
	covered := found.Covers(coverBy)
	if found.Complete && dropped == 0 {
		res.IndexedThrough = found.IndexedThrough
	}
	res.Authoritative = covered && dropped == 0
	res.LateCommitsBounded = bounded && res.Authoritative
	if !covered && found.Complete {
		res.ReadyIn = coverBy.Sub(found.IndexedThrough)
	}

	var parts []string
	switch len(res.Matches) {
	case 0:
		parts = append(parts, "no_match")
	case 1:
		parts = append(parts, "one_exact_match")
	default:
		parts = append(parts, fmt.Sprintf("multiple_exact_matches(%d)", len(res.Matches)))
	}
	switch {
	case !found.Complete:
		parts = append(parts, "inconclusive: results hidden or not filtered as asked")
	case !covered:
		parts = append(parts, "inconclusive: index lags dispatch (needs "+coverBy.UTC().Format(time.RFC3339Nano)+")")
	case !bounded && len(res.Matches) == 0:
		parts = append(parts, "late commits unbounded: no commit deadline promised")
	}
	if dropped > 0 {
		parts = append(parts, fmt.Sprintf("inconclusive: %d hit(s) denied by the authoritative read", dropped))
	}
	res.Detail = fmt.Sprintf("%s: %s (indexed_through=%s)", query, strings.Join(parts, "; "),
		found.IndexedThrough.UTC().Format(time.RFC3339Nano))
	return res, nil
}

// CoverThrough is the instant a search watermark must reach before a
// zero-match answer proves that op's latest dispatch created nothing: the
// end of the wait for that dispatch (the event that took the operation out
// of PENDING), or the lease end while it is still PENDING, plus
// CommitAllowance. Never earlier than the dispatch itself.
func CoverThrough(op operation.Operation) time.Time {
	end := op.LastDispatchAt
	if op.State == operation.StatePending {
		end = later(end, op.DueAt)
		return end.Add(CommitAllowance)
	}
	if outcome, ok := op.DispatchOutcome(); ok {
		end = later(end, outcome.At)
	} else {
		// No record of how the dispatch ended: the last update is a bound
		// no commit of that dispatch can be later than.
		end = later(end, op.UpdatedAt)
	}
	return end.Add(CommitAllowance)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
