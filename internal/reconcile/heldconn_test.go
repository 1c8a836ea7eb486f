package reconcile_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// The provider client keeps an abandoned request's connection until the
// provider answers (at most its timeout plus the settle window). Under
// Lambda there is one connection, and the sweep probes one operation after
// another, so the next probe can find it taken and give up without the
// provider ever being asked ("not dispatched"). Such a probe proves
// nothing and, like one the reconciler skips for lack of time, must not
// spend the operation's probe budget.
func TestAProbeThatWasNeverSentDoesNotSpendTheProbeBudget(t *testing.T) {
	f := newFixture(t)
	var lookups atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			lookups.Add(1)
		}
		f.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	// One connection, as in template.yaml; a settle window longer than the
	// call timeout, as with the code's defaults (downstream 2.5 s, Release
	// settle window 5 s).
	client, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: server.URL, APIKey: simKey, MaxConns: 1,
		Timeout: 300 * time.Millisecond, SettleWindow: 2 * time.Second,
	})
	require.NoError(t, err)
	family := riskreview.New(client, riskreview.DefaultRecovery())
	svc := f.service(t, family)

	first := f.toUnknown(t, f.storedOp(t, "op-heldconn-001", orderID(21), time.Minute))
	second := f.toUnknown(t, f.storedOp(t, "op-heldconn-002", orderID(22), time.Minute))
	f.clock.Advance(riskreviewSettle)
	f.faults(t, riskapi.Faults{LatencyMS: 1500}) // a latency spike

	_, err = svc.Reconcile(context.Background(), first) // abandoned at 300 ms, still at the provider
	require.NoError(t, err)
	require.Equal(t, 1, f.get(t, first.Handle).ProbeCount, "the first probe was sent and counts")

	_, err = svc.Reconcile(context.Background(), second)
	require.NoError(t, err)
	require.Equal(t, int32(1), lookups.Load(), "the second probe found the one connection taken and was never sent")
	got := f.get(t, second.Handle)
	assert.Equal(t, operation.StateUnknown, got.State)
	assert.Equal(t, 0, got.ProbeCount, "a probe the provider never received was counted against the probe budget: %s", lastEvent(got).Detail)
}
