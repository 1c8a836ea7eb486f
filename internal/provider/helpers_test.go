package provider_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

const apiKey = "provider-test-key"

func startRisk(t *testing.T) (*riskapi.Server, string) {
	t.Helper()
	sim := riskapi.New(riskapi.Config{APIKey: apiKey, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	return sim, server.URL
}

func startRelease(t *testing.T) (*releaseapi.Server, string) {
	t.Helper()
	sim := releaseapi.New(releaseapi.Config{APIKey: apiKey, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	return sim, server.URL
}

func riskClient(t *testing.T, baseURL string, maxConns int, timeout time.Duration) *provider.RiskClient {
	t.Helper()
	c, err := provider.NewRiskClient(provider.RiskConfig{BaseURL: baseURL, APIKey: apiKey, MaxConns: maxConns, Timeout: timeout})
	require.NoError(t, err)
	return c
}

func releaseClient(t *testing.T, baseURL string, timeout time.Duration) *provider.ReleaseClient {
	t.Helper()
	c, err := provider.NewReleaseClient(provider.ReleaseConfig{BaseURL: baseURL, APIKey: apiKey, MaxConns: 4, Timeout: timeout})
	require.NoError(t, err)
	return c
}

// closedPortURL is a loopback URL nothing listens on: bound, then released.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// headerRecorder is a fake provider that answers with a fixed response
// and records every request's headers.
type headerRecorder struct {
	mu      sync.Mutex
	headers []http.Header
}

func (h *headerRecorder) record(r *http.Request) {
	h.mu.Lock()
	h.headers = append(h.headers, r.Header.Clone())
	h.mu.Unlock()
}

func (h *headerRecorder) all() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}

// fakeProvider serves status and body for every request.
func fakeProvider(t *testing.T, status int, body string) (string, *headerRecorder) {
	t.Helper()
	rec := &headerRecorder{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(server.Close)
	return server.URL, rec
}
