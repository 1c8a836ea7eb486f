package riskapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
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

// raw sends a request straight to the simulator.
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
