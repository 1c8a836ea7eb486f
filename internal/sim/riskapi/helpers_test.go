package riskapi_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

const testKey = "risk-test-key"

type fixture struct {
	sim    *riskapi.Server
	server *httptest.Server
	client *provider.RiskClient
}

// newFixture starts a Risk API simulator on loopback and a real provider
// client with the given per-call timeout.
func newFixture(t *testing.T, timeout time.Duration) fixture {
	t.Helper()
	sim := riskapi.New(riskapi.Config{APIKey: testKey, HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	client, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: server.URL, APIKey: testKey, MaxConns: 4, Timeout: timeout,
	})
	require.NoError(t, err)
	return fixture{sim: sim, server: server, client: client}
}

func input(order string) provider.CreateReviewInput {
	return provider.CreateReviewInput{OrderID: order, Reason: "chargeback pattern", ReviewType: "fraud"}
}
