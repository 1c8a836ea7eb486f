package reconcile

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

func TestBackoffDoublesFromOneSecondAndCapsAtOneMinute(t *testing.T) {
	for n, want := range map[int]time.Duration{
		-1: time.Second, 0: time.Second, 1: 2 * time.Second, 5: 32 * time.Second, 6: time.Minute, 1000: time.Minute,
	} {
		assert.Equal(t, want, backoff(n), "n=%d", n)
	}
}

func TestRandomJitterStaysWithinTwentyPercent(t *testing.T) {
	for range 1000 {
		d := randomJitter(10 * time.Second)
		assert.GreaterOrEqual(t, d, 8*time.Second)
		assert.LessOrEqual(t, d, 12*time.Second)
	}
	assert.Equal(t, time.Duration(0), randomJitter(0))
}

// budgetOnly is a family whose only interesting part is its budgets.
type budgetOnly struct{ recovery tools.Recovery }

func (b budgetOnly) Name() string { return "budget_only" }
func (b budgetOnly) Prepare(context.Context, tools.Caller, json.RawMessage) (tools.Prepared, error) {
	return tools.Prepared{}, nil
}
func (b budgetOnly) Authorize(context.Context, tools.Caller, tools.Prepared) error { return nil }
func (b budgetOnly) Dispatch(context.Context, operation.Operation) (tools.Effect, error) {
	return tools.Effect{}, nil
}
func (b budgetOnly) Verify(context.Context, operation.Operation, tools.Effect) error { return nil }
func (b budgetOnly) Probe(context.Context, operation.Operation) (tools.ProbeResult, error) {
	return tools.ProbeResult{}, nil
}
func (b budgetOnly) Recovery() tools.Recovery { return b.recovery }

func TestBudgetsThatCouldOverflowTheJournalAreRefused(t *testing.T) {
	db, err := store.NewClient(context.Background(), store.ClientConfig{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	st, err := store.New(db, store.Config{Table: "unused"})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	newService := func(r tools.Recovery) error {
		_, err := New(Config{Executor: ex, Families: map[string]tools.WriteTool{"budget_only": budgetOnly{r}}})
		return err
	}
	assert.NoError(t, newService(tools.Recovery{ProbeBudget: 8, RetryBudget: 3}), "the risk family's budgets fit")
	err = newService(tools.Recovery{ProbeBudget: 20, RetryBudget: 3})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "journal events")
	assert.LessOrEqual(t, JournalNeeds(tools.Recovery{ProbeBudget: 8, RetryBudget: 3}), operation.MaxJournal)
}
