package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// Why a Sweep stopped.
const (
	StoppedDrained  = "drained"            // nothing more is due
	StoppedMax      = "max_per_invocation" // MaxPerInvocation examined
	StoppedDeadline = "deadline_reserve"   // less than Reserve left
)

// SweepReport summarises one Sweep.
type SweepReport struct {
	Examined    int // operations reconciled (whatever the decision)
	Transitions int // reconciler transitions written (claims included)
	ClaimsWon   int
	ClaimsLost  int
	ItemsRead   int // items the engine read from the due index
	Errors      int // operations whose reconciliation failed (retried next sweep)
	Stopped     string
	// OldestUnknownAge is the largest now - CreatedAt over the UNKNOWN
	// operations this sweep examined, taken before reconciling them (so an
	// operation the sweep resolves still counts); 0 when it examined none.
	// UNKNOWN operations not yet due for their next probe (backoff) or
	// beyond MaxPerInvocation are not seen.
	OldestUnknownAge time.Duration
	// OldestRetryableAge is the same over the RETRYABLE operations examined.
	OldestRetryableAge time.Duration
}

// Sweep pages through the due index (never a table scan) and reconciles
// each due operation, within MaxPerInvocation and ctx's remaining time
// minus Reserve. A failure on one operation is counted and logged; the
// next sweep sees it again. Only a failing index query is returned as an
// error.
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := s.cfg.Executor.Now()
	cursor := ""
	for {
		if stop := s.stopReason(ctx, rep.Examined); stop != "" {
			rep.Stopped = stop
			return rep, nil
		}
		limit := min(s.cfg.BatchLimit, s.cfg.MaxPerInvocation-rep.Examined)
		sctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
		page, err := s.st.Due(sctx, now, limit, cursor)
		cancel()
		if err != nil {
			return rep, fmt.Errorf("sweep: %w", err)
		}
		rep.ItemsRead += page.ItemsRead
		for _, op := range page.Operations {
			if stop := s.stopReason(ctx, rep.Examined); stop != "" {
				rep.Stopped = stop
				return rep, nil
			}
			rep.Examined++
			if op.State == operation.StateUnknown {
				rep.OldestUnknownAge = max(rep.OldestUnknownAge, now.Sub(op.CreatedAt))
			}
			if op.State == operation.StateRetryable {
				rep.OldestRetryableAge = max(rep.OldestRetryableAge, now.Sub(op.CreatedAt))
			}
			res, err := s.Reconcile(ctx, op)
			if err != nil {
				rep.Errors++
				s.cfg.Auditor.Logger().LogAttrs(ctx, slog.LevelError, "reconcile failed",
					slog.String("handle", op.Handle), slog.String("error", err.Error()))
			}
			rep.add(res)
		}
		if page.Cursor == "" {
			rep.Stopped = StoppedDrained
			return rep, nil
		}
		cursor = page.Cursor
	}
}

func (s *Service) stopReason(ctx context.Context, examined int) string {
	if examined >= s.cfg.MaxPerInvocation {
		return StoppedMax
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
