package stack_test

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

func TestExhaustedSlotsAndQueueAnswerOverloaded(t *testing.T) {
	const maxInFlight, maxQueue, callers = 2, 2, 12
	h := startStack(t, 1, map[string]string{
		"INTENTGATE_MAX_IN_FLIGHT":        fmt.Sprint(maxInFlight),
		"INTENTGATE_MAX_QUEUE":            fmt.Sprint(maxQueue),
		"INTENTGATE_MAX_QUEUE_WAIT":       "100ms",
		"INTENTGATE_DOWNSTREAM_MAX_CONNS": fmt.Sprint(maxInFlight),
	})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{LatencyMS: 300}))
	tok := h.token(t, "ALICE")

	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		sessions[i] = connect(t, h.MCPURLs[0], tok, protocolNew)
	}
	results := make([]map[string]any, callers)
	testsync.Race(callers, func(i int) {
		results[i], _ = call(t, sessions[i], riskreview.ToolRequest, reviewArgs(fmt.Sprintf("O202607280%02d", 20+i), "burst", ""))
	})

	overloaded, succeeded := 0, 0
	for _, r := range results {
		switch {
		case r["code"] == "OVERLOADED":
			overloaded++
			assert.Equal(t, true, r["retry_allowed"], "overload is safe to retry: nothing was recorded or sent")
			assert.Contains(t, r["next_action"].(map[string]any)["hint"], "retry after")
		case r["status"] == "SUCCEEDED":
			succeeded++
		default:
			t.Errorf("unexpected result %v", r)
		}
	}
	assert.Positive(t, overloaded, "callers beyond slots and queue are refused")
	assert.Positive(t, succeeded)
	assert.Equal(t, callers, overloaded+succeeded)
	st := h.Risk.Stats()
	assert.LessOrEqual(t, st.MaxInFlight, maxInFlight, "the downstream never sees more than the cap")
	assert.Equal(t, succeeded, st.CreateCalls, "refused callers sent nothing")
	assert.Contains(t, h.out.String(), `"code":"OVERLOADED"`)
}
