package release_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A key first answered by deduplication stays bound to its holder;
// replayed after the holder FAILED (an operator's FAILED, a withdrawal),
// the answer is deduplicated onto a FAILED operation, whose failure
// released the fact: its next_action must not say both "do not create
// another ticket" and the holder's "call the tool again with a NEW
// operation_id".
func TestADedupOntoAFailedHolderDoesNotSayBothDoNotCreateAndCreate(t *testing.T) {
	op := walk(t,
		operation.Event{Type: operation.EventProbeBudgetExhausted},
		operation.Event{Type: operation.EventOperatorFailed, Actor: "oncall", Source: "operator", Detail: "no ticket"})
	require.Equal(t, operation.StateFailed, op.State)

	res := release.NewResult(alice, tools.Submission{Operation: op, Deduplicated: true, Replayed: true})
	hint := res.NextAction.Hint
	assert.False(t, strings.Contains(hint, "do not create another ticket") && strings.Contains(hint, "call the tool again with a NEW operation_id"),
		"contradictory next_action: %s", hint)
}
