package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

func TestMaxConnsCapsConcurrentCallsToTheProvider(t *testing.T) {
	sim, url := startRisk(t)
	require.NoError(t, sim.SetFaults(riskapi.Faults{LatencyMS: 50}))
	const maxConns = 3
	c := riskClient(t, url, maxConns, 5*time.Second)

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := c.CreateReview(context.Background(), fmt.Sprintf("op-%d", i), review)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	stats := sim.Stats()
	assert.Equal(t, 20, stats.ReviewsCommitted)
	assert.LessOrEqual(t, stats.MaxInFlight, maxConns)
	assert.GreaterOrEqual(t, stats.MaxInFlight, 1)
}

func TestNoAuthorizationHeaderIsEverSent(t *testing.T) {
	url, rec := fakeProvider(t, http.StatusTeapot, `{}`)
	ctx := context.Background()
	rc := riskClient(t, url, 2, time.Second)
	_, _ = rc.CreateReview(ctx, "op-1", review)
	_, _, _ = rc.FindReviewByRequestKey(ctx, "op-1")
	_, _ = rc.GetReview(ctx, "rv-1")
	_, _ = rc.GetOrder(ctx, "O1")
	lc := releaseClient(t, url, time.Second)
	_, _ = lc.CreateTicket(ctx, ticket)
	_, _ = lc.GetTicket(ctx, "ticket-1")
	_, _ = lc.SearchTickets(ctx, ticket.Target())

	headers := rec.all()
	require.Len(t, headers, 7)
	for _, h := range headers {
		assert.Empty(t, h.Values("Authorization"))
		assert.Equal(t, apiKey, h.Get("X-Api-Key"))
	}
	assert.Equal(t, "op-1", headers[0].Get("Idempotency-Key"))

	sim, simURL := startRisk(t)
	_, err := riskClient(t, simURL, 2, time.Second).CreateReview(ctx, "op-2", review)
	require.NoError(t, err)
	assert.False(t, sim.Stats().ForeignAuthorizationSeen)
}

func TestConfigIsValidated(t *testing.T) {
	good := provider.RiskConfig{BaseURL: "http://127.0.0.1:1", APIKey: "k", MaxConns: 1, Timeout: time.Second}
	_, err := provider.NewRiskClient(good)
	require.NoError(t, err)
	for name, mutate := range map[string]func(*provider.RiskConfig){
		"relative url":           func(c *provider.RiskConfig) { c.BaseURL = "/risk" },
		"no api key":             func(c *provider.RiskConfig) { c.APIKey = "" },
		"no timeout":             func(c *provider.RiskConfig) { c.Timeout = 0 },
		"no connection cap":      func(c *provider.RiskConfig) { c.MaxConns = 0 },
		"cap with custom client": func(c *provider.RiskConfig) { c.HTTPClient = &http.Client{} },
		"client and wrapper": func(c *provider.RiskConfig) {
			c.MaxConns = 0
			c.HTTPClient = &http.Client{}
			c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt }
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			_, err := provider.NewRiskClient(cfg)
			assert.Error(t, err)
		})
	}
	_, err = provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: "http://127.0.0.1:1", APIKey: "k", Timeout: time.Second, HTTPClient: &http.Client{}})
	require.NoError(t, err, "a custom client brings its own cap")
}

// countingTransport stands in for an instrumenting wrapper such as X-Ray's.
type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

func TestWrapTransportKeepsTheConnectionCap(t *testing.T) {
	sim, url := startRisk(t)
	require.NoError(t, sim.SetFaults(riskapi.Faults{LatencyMS: 20}))
	var calls atomic.Int32
	c, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: url, APIKey: apiKey, MaxConns: 2, Timeout: 5 * time.Second,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return countingTransport{next: rt, calls: &calls}
		},
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := c.CreateReview(context.Background(), fmt.Sprintf("op-w%d", i), review)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(8), calls.Load())
	assert.LessOrEqual(t, sim.Stats().MaxInFlight, 2)
}

// A request whose caller gives up after it was sent is still the
// provider's work: it goes on answering it. Its connection, which is what
// MaxConns counts, stays taken until the provider answers (or the call's
// own Timeout), so callers abandoning slow requests (an ownership lookup
// past its short budget, in a latency spike) cannot pile more concurrent
// work onto the provider than MaxConns. The caller itself is answered at
// its own deadline, as before; a request that was never sent is stopped.
func TestARequestItsCallerAbandonedStillCountsAgainstMaxConns(t *testing.T) {
	sim, url := startRisk(t)
	require.NoError(t, sim.SetFaults(riskapi.Faults{LatencyMS: 400}))
	const maxConns = 2
	c := riskClient(t, url, maxConns, 5*time.Second)

	var wg sync.WaitGroup
	var abandoned atomic.Int32
	for range 12 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := c.GetOrder(ctx, "O20260728001")
			if err != nil {
				abandoned.Add(1)
			}
			assert.Less(t, time.Since(start), 300*time.Millisecond, "the caller is answered at its own deadline")
		})
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	require.Equal(t, int32(12), abandoned.Load(), "every caller gave up before the provider answered")
	assert.Eventually(t, func() bool { return sim.Stats().MaxInFlight > 0 }, time.Second, 10*time.Millisecond)
	assert.LessOrEqual(t, sim.Stats().MaxInFlight, maxConns,
		"abandoned requests the provider was still working on, plus new ones, exceeded MaxConns")
}

// A provider that never answers does not keep an abandoned request's
// connection forever: it is given up once the provider can no longer be
// working on it (Timeout plus SettleWindow), and the next call is sent. A
// call that found no free connection before its own deadline was never
// sent, and says so.
func TestAnAbandonedRequestHoldsItsConnectionForAtMostTimeoutAndSettleWindow(t *testing.T) {
	var received atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		<-r.Context().Done() // never answers; ends when the client hangs up
	}))
	t.Cleanup(hang.Close)
	c, err := provider.NewRiskClient(provider.RiskConfig{BaseURL: hang.URL, APIKey: apiKey, MaxConns: 1,
		Timeout: 300 * time.Millisecond, SettleWindow: 200 * time.Millisecond})
	require.NoError(t, err)
	lookup := func(wait time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err := c.GetOrder(ctx, "O20260728001")
		return err
	}

	start := time.Now()
	require.Error(t, lookup(50*time.Millisecond), "abandoned at the caller's deadline")
	var pe *provider.Error
	require.ErrorAs(t, lookup(100*time.Millisecond), &pe, "its connection is still the abandoned request's")
	assert.Equal(t, provider.ClassNotDispatched, pe.Class, "never sent: no connection was free")
	assert.Equal(t, int32(1), received.Load())

	time.Sleep(time.Until(start.Add(600 * time.Millisecond)))
	require.Error(t, lookup(100*time.Millisecond))
	assert.Equal(t, int32(2), received.Load(), "the connection was given up after Timeout plus SettleWindow")
}
