package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultBudgetMatchesSeedExample(t *testing.T) {
	b := DefaultBudget()
	require.NoError(t, b.Validate())
	assert.Equal(t, 100*time.Millisecond, b.Auth)
	assert.Equal(t, 300*time.Millisecond, b.Store)
	assert.Equal(t, 2500*time.Millisecond, b.Downstream)
	assert.Equal(t, 2100*time.Millisecond, b.Reserve)
	assert.Equal(t, 5*time.Second, b.Total())
}

func TestBudgetValidateRejectsNonPositiveStages(t *testing.T) {
	for name, mutate := range map[string]func(*BudgetConfig){
		"Auth":       func(b *BudgetConfig) { b.Auth = 0 },
		"Store":      func(b *BudgetConfig) { b.Store = -time.Second },
		"Downstream": func(b *BudgetConfig) { b.Downstream = 0 },
		"Reserve":    func(b *BudgetConfig) { b.Reserve = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			b := DefaultBudget()
			mutate(&b)
			err := b.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), name)
		})
	}
}

// parentWithDeadline returns a context whose deadline is base+offset.
func parentWithDeadline(t *testing.T, base time.Time, offset time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), base.Add(offset))
	t.Cleanup(cancel)
	return ctx
}

func TestStageDeadlineIsEarlierOfLimitAndParentMinusReserve(t *testing.T) {
	b := DefaultBudget()
	// A fixed "now" an hour ahead keeps every parent context alive while
	// the table is evaluated; nothing here reads the clock.
	now := time.Now().Add(time.Hour).Truncate(time.Second)

	tests := []struct {
		name       string
		parent     time.Duration // parent deadline relative to now; 0 = none
		limit      time.Duration
		wantOffset time.Duration // expected deadline relative to now
	}{
		{"no parent deadline uses the stage limit", 0, b.Downstream, 2500 * time.Millisecond},
		{"seed example 5s leaves the full downstream stage", 5 * time.Second, b.Downstream, 2500 * time.Millisecond},
		{"generous parent uses the stage limit", time.Minute, b.Downstream, 2500 * time.Millisecond},
		{"tight parent ends the stage before the reserve", 4 * time.Second, b.Downstream, 1900 * time.Millisecond},
		{"parent exactly at reserve gives a zero stage", 2100 * time.Millisecond, b.Downstream, 0},
		{"parent inside the reserve gives a deadline in the past", time.Second, b.Downstream, -1100 * time.Millisecond},
		{"store stage bounded by its own limit", 5 * time.Second, b.Store, 300 * time.Millisecond},
		{"store stage bounded by the reserve", 2200 * time.Millisecond, b.Store, 100 * time.Millisecond},
		{"auth stage bounded by its own limit", 5 * time.Second, b.Auth, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.parent != 0 {
				ctx = parentWithDeadline(t, now, tc.parent)
			}
			got := b.stageDeadline(ctx, now, tc.limit)
			assert.Equal(t, now.Add(tc.wantOffset), got)
			if tc.parent != 0 {
				parent, _ := ctx.Deadline()
				assert.True(t, got.Before(parent), "stage must end before the parent")
				assert.False(t, got.After(now.Add(tc.limit)), "stage never extends past now+limit")
				assert.GreaterOrEqual(t, parent.Sub(got), b.Reserve, "reserve is always left")
			}
		})
	}
}

func TestDeadlineAndRemainingReportTheForwardPathDeadline(t *testing.T) {
	b := DefaultBudget()
	now := time.Now().Add(time.Hour).Truncate(time.Second)

	tests := []struct {
		name          string
		parent        time.Duration
		wantOK        bool
		wantRemaining time.Duration
	}{
		{"no deadline is unbounded", 0, false, Unbounded},
		{"seed example", 5 * time.Second, true, 2900 * time.Millisecond},
		{"inside the reserve is negative", time.Second, true, -1100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.parent != 0 {
				ctx = parentWithDeadline(t, now, tc.parent)
			}
			d, ok := b.Deadline(ctx)
			assert.Equal(t, tc.wantOK, ok)
			if ok {
				assert.Equal(t, now.Add(tc.parent-b.Reserve), d)
			}
			assert.Equal(t, tc.wantRemaining, b.remaining(ctx, now))
		})
	}
}

func TestDownstreamContextEndsReserveBeforeTightParent(t *testing.T) {
	b := DefaultBudget()
	parent := parentWithDeadline(t, time.Now(), time.Hour)
	// Budget whose downstream limit is longer than the parent allows.
	long := b
	long.Downstream = 2 * time.Hour

	ctx, cancel := long.DownstreamContext(parent)
	defer cancel()
	got, ok := ctx.Deadline()
	require.True(t, ok)
	pd, _ := parent.Deadline()
	assert.Equal(t, pd.Add(-b.Reserve), got)
}

// Tests that read the wall clock run in a synctest bubble, where it stands
// still while the test runs: the deadlines they check are exact.

func TestDownstreamContextUsesLimitUnderGenerousParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := DefaultBudget()
		parent := parentWithDeadline(t, time.Now(), time.Hour)

		ctx, cancel := b.DownstreamContext(parent)
		defer cancel()

		got, ok := ctx.Deadline()
		require.True(t, ok)
		assert.Equal(t, time.Now().Add(b.Downstream), got)
	})
}

func TestDownstreamContextInsideReserveIsAlreadyExpired(t *testing.T) {
	b := DefaultBudget()
	parent := parentWithDeadline(t, time.Now(), time.Second) // less than the 2.1s reserve

	assert.Negative(t, b.Remaining(parent))
	ctx, cancel := b.DownstreamContext(parent)
	defer cancel()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.NoError(t, parent.Err(), "the parent itself still has time to answer")
}

func TestStoreContextIsBoundedByStoreAndReserve(t *testing.T) {
	b := DefaultBudget()
	parent := parentWithDeadline(t, time.Now(), 2200*time.Millisecond)
	pd, _ := parent.Deadline()

	ctx, cancel := b.StoreContext(parent)
	defer cancel()
	got, ok := ctx.Deadline()
	require.True(t, ok)
	// now+300ms is later than parent-2.1s (= now+~100ms), so the reserve wins.
	assert.Equal(t, pd.Add(-b.Reserve), got)

	actx, acancel := b.AuthContext(parentWithDeadline(t, time.Now(), time.Hour))
	defer acancel()
	_, ok = actx.Deadline()
	assert.True(t, ok)
}

type ctxKey struct{}

func TestDetachedStoreContextSurvivesCallerCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := DefaultBudget()
		parent, cancelParent := context.WithDeadline(
			context.WithValue(context.Background(), ctxKey{}, "request-7"),
			time.Now().Add(50*time.Millisecond))

		ctx, cancel := b.DetachedStoreContext(parent)
		defer cancel()

		cancelParent() // the caller goes away
		require.Error(t, parent.Err())
		assert.NoError(t, ctx.Err(), "the final state write must not be cancelled with the caller")
		assert.Equal(t, "request-7", ctx.Value(ctxKey{}), "values such as trace ids are kept")

		got, ok := ctx.Deadline()
		require.True(t, ok, "the detached write is still bounded")
		assert.Equal(t, time.Now().Add(b.Store), got)
	})
}

func TestDetachedStoreContextFromExpiredParentStillHasStoreTime(t *testing.T) {
	b := DefaultBudget()
	parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	require.True(t, errors.Is(parent.Err(), context.DeadlineExceeded))

	ctx, dcancel := b.DetachedStoreContext(parent)
	defer dcancel()
	assert.NoError(t, ctx.Err())
}
