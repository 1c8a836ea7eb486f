package releaseapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

const testKey = "release-test-key"

// testClock is a settable clock so lag and watermarks are deterministic.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	sim    *releaseapi.Server
	clock  *testClock
	server *httptest.Server
	client *provider.ReleaseClient
}

func newFixture(t *testing.T, lag, timeout time.Duration) fixture {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 8, 13, 10, 51, 4, 120_000_000, time.UTC)}
	sim := releaseapi.New(releaseapi.Config{APIKey: testKey, Clock: clock.Now, SearchLag: lag, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{
		BaseURL: server.URL, APIKey: testKey, MaxConns: 4, Timeout: timeout,
	})
	require.NoError(t, err)
	return fixture{sim: sim, clock: clock, server: server, client: client}
}

var payments = provider.TicketInput{Service: "payments-api", Commit: "8bc911d", Environment: "production-eu", RequestedBy: "cc-run-3188"}

const paymentsTarget = "payments-api/8bc911d/production-eu"

func (f fixture) raw(t *testing.T, method, path string, header http.Header, body any) (int, []byte) {
	t.Helper()
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		require.NoError(t, err)
		reader = bytes.NewReader(encoded)
	}
	req, err := http.NewRequest(method, f.server.URL+path, reader)
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

func requireClass(t *testing.T, want provider.Class, err error) *provider.Error {
	t.Helper()
	require.Error(t, err)
	var perr *provider.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, want, perr.Class, "error: %v", err)
	return perr
}

func intPtr(v int) *int { return &v }
