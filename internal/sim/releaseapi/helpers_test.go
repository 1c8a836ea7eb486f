package releaseapi_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/testclock"
)

const testKey = "release-test-key"

type fixture struct {
	sim    *releaseapi.Server
	clock  *testclock.Clock // settable, so lag and watermarks are deterministic
	server *httptest.Server
	client *provider.ReleaseClient
}

func newFixture(t *testing.T, lag, timeout time.Duration) fixture {
	t.Helper()
	clock := testclock.New(time.Date(2026, 8, 13, 10, 51, 4, 120_000_000, time.UTC))
	sim := releaseapi.New(releaseapi.Config{APIKey: testKey, Clock: clock.Now, SearchLag: lag, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewReleaseClient(provider.ReleaseConfig{
		BaseURL: server.URL, APIKey: testKey, MaxConns: 4, Timeout: timeout,
	})
	require.NoError(t, err)
	return fixture{sim: sim, clock: clock, server: server, client: client}
}

var payments = provider.TicketInput{Service: "payments-api", Commit: "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", Environment: "production-eu", RequestedBy: "cc-run-3188"}

const paymentsTarget = "payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"

func intPtr(v int) *int { return &v }
