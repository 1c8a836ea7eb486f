package admission

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Unbounded is what Remaining reports for a context without a deadline.
const Unbounded = time.Duration(math.MaxInt64)

// BudgetConfig splits one call's deadline into stages, so a slow
// stage cannot eat the time needed to answer with a handle before the
// caller gives up (docs/design.md, Capacity model).
// The numbers are a discussable starting point, not a performance promise.
type BudgetConfig struct {
	// Auth bounds token verification and policy (incl. a JWKS fetch).
	Auth time.Duration
	// Store bounds each store call (not all of them together).
	Store time.Duration
	// Downstream bounds one provider call.
	Downstream time.Duration
	// Reserve is kept back from the caller's deadline for recording the
	// final state (UNKNOWN included), serialising and answering. No
	// forward-path stage (auth, store, downstream) may run into it.
	Reserve time.Duration
}

// DefaultBudget is the default split of a 5s client deadline:
// 0.1s auth, 0.3s per store call, 2.5s downstream, 2.1s reserve.
func DefaultBudget() BudgetConfig {
	return BudgetConfig{
		Auth:       100 * time.Millisecond,
		Store:      300 * time.Millisecond,
		Downstream: 2500 * time.Millisecond,
		Reserve:    2100 * time.Millisecond,
	}
}

// Validate requires every stage to be positive.
func (b BudgetConfig) Validate() error {
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"Auth", b.Auth}, {"Store", b.Store}, {"Downstream", b.Downstream}, {"Reserve", b.Reserve}} {
		if s.d <= 0 {
			return fmt.Errorf("admission: budget %s must be > 0, got %s", s.name, s.d)
		}
	}
	return nil
}

// Total is the sum of the stages: the client deadline this budget is
// designed for. Function timeouts should be at least this long, so the
// budget, not the platform, decides when a call gives up.
func (b BudgetConfig) Total() time.Duration {
	return b.Auth + b.Store + b.Downstream + b.Reserve
}

// Deadline is the effective deadline of the forward path: the parent's
// deadline minus Reserve. ok is false when the parent has no deadline.
func (b BudgetConfig) Deadline(ctx context.Context) (deadline time.Time, ok bool) {
	parent, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return parent.Add(-b.Reserve), true
}

// Remaining is the time left before the reserve starts; zero or negative
// means the forward path is already out of time and nothing should be
// dispatched (answer at once instead). Unbounded when ctx has no deadline.
func (b BudgetConfig) Remaining(ctx context.Context) time.Duration {
	return b.remaining(ctx, time.Now())
}

func (b BudgetConfig) remaining(ctx context.Context, now time.Time) time.Duration {
	d, ok := b.Deadline(ctx)
	if !ok {
		return Unbounded
	}
	return d.Sub(now)
}

// DownstreamContext bounds one provider call: its deadline is the earlier
// of now+Downstream and the parent's deadline minus Reserve, so the call
// always ends before the caller's (and the Lambda's) deadline with time
// left to record UNKNOWN and answer. If the parent has less than Reserve
// left, the returned context has already expired; callers should check
// Remaining first and not dispatch at all rather than dispatch into an
// expired context.
func (b BudgetConfig) DownstreamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, b.stageDeadline(ctx, time.Now(), b.Downstream))
}

// StoreContext bounds one in-line store call (replay lookup, insert, reads)
// by Store and, like DownstreamContext, by the parent's deadline minus
// Reserve: the forward path never eats into the reserve.
func (b BudgetConfig) StoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, b.stageDeadline(ctx, time.Now(), b.Store))
}

// AuthContext bounds token verification and policy the same way.
func (b BudgetConfig) AuthContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, b.stageDeadline(ctx, time.Now(), b.Auth))
}

// DetachedStoreContext is for the final state write after a dispatch
// (SUCCEEDED, FAILED, and above all UNKNOWN). It keeps ctx's values but not
// its cancellation or deadline, bounded by Store alone: a write recording
// UNKNOWN must not be cancelled by the caller going away or by the caller's
// deadline arriving; it is what the Reserve is for. It still ends, so a
// hung store cannot hold the call forever.
func (b BudgetConfig) DetachedStoreContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.Store)
}

// stageDeadline is the earlier of now+limit and parent deadline - Reserve.
func (b BudgetConfig) stageDeadline(ctx context.Context, now time.Time, limit time.Duration) time.Time {
	stage := now.Add(limit)
	if d, ok := b.Deadline(ctx); ok && d.Before(stage) {
		return d
	}
	return stage
}
