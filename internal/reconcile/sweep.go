package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// Why a Sweep stopped.
const (
	StoppedDrained  = "drained"                   // nothing more is due
	StoppedMax      = "max_per_invocation"        // MaxPerInvocation examined
	StoppedMaxPark  = "max_parked_per_invocation" // MaxParkPerInvocation parked
	StoppedDeadline = "deadline_reserve"          // less than Reserve left
)

// SweepReport summarises one Sweep.
type SweepReport struct {
	Examined    int // operations reconciled (whatever the decision)
	Transitions int // reconciler transitions written (claims included)
	ClaimsWon   int
	ClaimsLost  int
	ItemsRead   int // items the engine read from the due index
	Errors      int // operations whose reconciliation failed (retried next sweep)
	// Unrunnable counts due operations of a tool this reconciler has no
	// family for, found in the shards and parked (moved to their tool's
	// parked partition, which only a reconciler with the family reads).
	// They need an operator or a reconciler with the family: the
	// unrunnable-operations alarm watches this.
	Unrunnable int
	Stopped    string
	// OldestUnknownAge is the largest now - CreatedAt over the UNKNOWN
	// operations this sweep examined, taken before reconciling them (so an
	// operation the sweep resolves still counts); 0 when it examined none.
	// UNKNOWN operations not yet due for their next probe (backoff) or
	// beyond MaxPerInvocation are not seen.
	OldestUnknownAge time.Duration
	// OldestRetryableAge is the same over the RETRYABLE operations examined.
	OldestRetryableAge time.Duration
}

// Sweep reads the due index (never a table scan): every swept shard and the
// parked entries of its own tools, merged oldest first, and reconciles each
// due operation, within MaxPerInvocation and ctx's remaining time minus
// Reserve. An operation of a tool it has no family for is parked instead
// and does not count against MaxPerInvocation, so such operations never
// starve the ones it can run. A failure on one operation is counted and
// logged; the next sweep sees it again. Only a failing index read is
// returned as an error.
func (s *Service) Sweep(ctx context.Context) (rep SweepReport, err error) {
	now := s.cfg.Executor.Now()
	tools := slices.Sorted(maps.Keys(s.cfg.Families))
	sctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
	shards, serr := s.st.SweptShards(sctx)
	cancel()
	if serr != nil {
		// The configured shards are still swept; the next sweep reads the
		// recorded counts again.
		s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelWarn, "due shard counts unread", slog.String("error", serr.Error()))
	}
	reader := s.st.NewDueReader(now, store.DueReaderOptions{
		Shards: shards,
		// Small pages across many partitions: what is read but never
		// examined when the sweep stops is at most one page per partition.
		PageLimit:   min(s.cfg.BatchLimit, max(1, ceilDiv(s.cfg.MaxPerInvocation, shards+len(tools)))),
		ParkedTools: tools,
		// Each query is one store call with its own store budget.
		QueryContext: s.cfg.Executor.Budget().StoreContext,
	})
	defer func() { rep.ItemsRead = reader.ItemsRead() }()
	parkTries := 0
	// Tools whose provider refused a search in this sweep (never sent).
	unreachable := map[string]bool{}
	for {
		if stop := s.stopReason(ctx, rep.Examined, parkTries); stop != "" {
			rep.Stopped = stop
			return rep, nil
		}
		op, ok, rerr := reader.Next(ctx)
		var undecodable *store.UndecodableItemError
		if errors.As(rerr, &undecodable) {
			// One operation's failure, like any other: stopping here would
			// leave everything due after it unswept, every sweep. Bounded
			// with the parked ones (items that are no work for this build),
			// so many of them cannot take every sweep's time.
			parkTries++
			rep.Errors++
			s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "due item undecodable",
				slog.String("pk", undecodable.PK), slog.String("error", undecodable.Err.Error()))
			continue
		}
		if rerr != nil {
			return rep, fmt.Errorf("sweep: %w", rerr)
		}
		if !ok {
			rep.Stopped = StoppedDrained
			return rep, nil
		}
		if _, runnable := s.cfg.Families[op.Key.Tool]; !runnable {
			parkTries++
			s.park(ctx, op, &rep)
			continue
		}
		if !op.NeedsReconciliation() {
			// In the index but settled as this build reads it: a hand
			// edit, or work a newer build scheduled (a canary, a rollback)
			// that this one must not erase. Left in place, bounded with
			// the parked, so it cannot take the sweep's examined work.
			parkTries++
			s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelWarn, "due item needs no reconciliation as this build reads it: left for the build that scheduled it",
				slog.String("handle", op.Handle), slog.String("state", string(op.State)))
			continue
		}
		family := s.cfg.Families[op.Key.Tool]
		if unreachable[op.Key.Tool] && needsSearch(op, family.Recovery(), now) {
			// Its provider refused this sweep's first search: the others of
			// the family are moved on without another attempt each, and
			// bounded with the parked, so they cannot fill the sweep.
			parkTries++
			if err := s.postpone(ctx, op); err != nil {
				rep.Errors++
				s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "postponing a search for an unreachable provider failed",
					slog.String("handle", op.Handle), slog.String("error", err.Error()))
			}
			continue
		}
		rep.Examined++
		if op.State == operation.StateUnknown {
			rep.OldestUnknownAge = max(rep.OldestUnknownAge, now.Sub(op.CreatedAt))
		}
		if op.State == operation.StateRetryable {
			rep.OldestRetryableAge = max(rep.OldestRetryableAge, now.Sub(op.CreatedAt))
		}
		res, rerr := s.Reconcile(ctx, op)
		if res.NotSent {
			unreachable[op.Key.Tool] = true
			rep.Examined--
			parkTries++
		}
		if rerr != nil {
			rep.Errors++
			s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "reconcile failed",
				slog.String("handle", op.Handle), slog.String("error", rerr.Error()))
		}
		rep.add(res)
	}
}

// park moves an operation no family here can run out of the shards.
func (s *Service) park(ctx context.Context, op operation.Operation, rep *SweepReport) {
	pctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
	parked, err := s.st.Park(pctx, op)
	cancel()
	switch {
	case err != nil:
		rep.Errors++
		s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "park failed",
			slog.String("handle", op.Handle), slog.String("tool", op.Key.Tool), slog.String("error", err.Error()))
	case parked:
		rep.Unrunnable++
		s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelWarn, "operation parked: no tool family here",
			slog.String("handle", op.Handle), slog.String("tool", op.Key.Tool), slog.String("state", string(op.State)),
			slog.String("parked_key", store.ParkedKey(op.Key.Tool)))
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (s *Service) stopReason(ctx context.Context, examined, parkTries int) string {
	if examined >= s.cfg.MaxPerInvocation {
		return StoppedMax
	}
	if parkTries >= s.cfg.MaxParkPerInvocation {
		return StoppedMaxPark
	}
	if left, bounded := remaining(ctx); bounded && left < s.cfg.Reserve {
		return StoppedDeadline
	}
	return ""
}

func (r *SweepReport) add(res Result) {
	switch res.ClaimResult {
	case ClaimWon:
		r.ClaimsWon++
	case ClaimLost:
		r.ClaimsLost++
	}
	if res.Event != "" {
		r.Transitions++
	}
}
