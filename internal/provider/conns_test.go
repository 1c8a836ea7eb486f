package provider_test

import (
	"context"
	"fmt"
	"net/http"
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
