package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// rendezvous holds every request that arrives until want of them are in
// flight together, then lets them all through. A request still alone after
// the deadlock breaker goes through too and is counted as late.
type rendezvous struct {
	want    int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	late    int
}

func newRendezvous(want int) *rendezvous {
	return &rendezvous{want: want, all: make(chan struct{})}
}

func (r *rendezvous) arrive() {
	r.mu.Lock()
	r.arrived++
	if r.arrived == r.want {
		close(r.all)
	}
	r.mu.Unlock()
	select {
	case <-r.all:
	case <-time.After(10 * time.Second): // only a deadlock breaker
		r.mu.Lock()
		r.late++
		r.mu.Unlock()
	}
}

// fakeSSM answers GetParameter (AWS JSON 1.1) from values, after the
// rendezvous.
func fakeSSM(t *testing.T, meet *rendezvous, values map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Name string }
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, `{"__type":"InvalidAction"}`, http.StatusBadRequest)
			return
		}
		meet.arrive()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
			"Name": in.Name, "Type": "SecureString", "Value": values[in.Name], "Version": 1,
		}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// At cold start the JWKS and every SecureString are fetched at once, not one
// after another: on Lambda each is a network round trip, and in sequence
// they were the longest part of a cold start. Each request here is held
// until all three are in flight together.
func TestBuildFetchesTheJWKSAndTheSecureStringsAtOnce(t *testing.T) {
	meet := newRendezvous(3)
	ssm := fakeSSM(t, meet, map[string]string{"/intentgate/risk": "risk-key", "/intentgate/release": "release-key"})
	iss, err := issuer.New("https://auth.example.com/")
	require.NoError(t, err)
	// The start fetches the JWKS once (TestNewVerifierFetchesTheJWKSOnce);
	// only the first JWKS request meets the others all the same, so that a
	// second one could never meet one SecureString and hide a sequential read.
	var firstJWKS sync.Once
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, issuer.JWKSPath) {
			firstJWKS.Do(meet.arrive)
		}
		iss.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(jwks.Close)

	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_SSM_ENDPOINT":              ssm.URL,
		"INTENTGATE_RISK_API_KEY_PARAMETER":    "/intentgate/risk",
		"INTENTGATE_RELEASE_API_URL":           "http://127.0.0.1:1",
		"INTENTGATE_RELEASE_API_KEY_PARAMETER": "/intentgate/release",
		"INTENTGATE_JWT_ISSUER":                "https://auth.example.com/",
		"INTENTGATE_JWKS_URL":                  jwks.URL + issuer.JWKSPath,
		"INTENTGATE_RESOURCE_URL":              "https://mcp.example.com/mcp",
	})
	a, err := Build(context.Background(), cfg, Options{PrefetchJWKS: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	_, err = a.Handler(context.Background())
	require.NoError(t, err)

	assert.Equal(t, "risk-key", a.Config.RiskAPIKey)
	assert.Equal(t, "release-key", a.Config.ReleaseAPIKey)
	meet.mu.Lock()
	defer meet.mu.Unlock()
	assert.Equal(t, 3, meet.arrived)
	assert.Zero(t, meet.late, "the JWKS and both SecureStrings were not all in flight together")
}

// A JWKS that cannot be fetched still stops the start, at Handler, and a
// Build that fails after starting the fetch leaves nothing running.
func TestAJWKSThatCannotBeFetchedStillFailsTheStart(t *testing.T) {
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY": "k",
		"INTENTGATE_JWT_ISSUER":   "https://auth.example.com/",
		"INTENTGATE_JWKS_URL":     "http://127.0.0.1:1/jwks.json",
		"INTENTGATE_RESOURCE_URL": "https://mcp.example.com/mcp",
	})
	for _, prefetch := range []bool{true, false} {
		a, err := Build(context.Background(), cfg, Options{PrefetchJWKS: prefetch})
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		_, err = a.Handler(context.Background())
		require.Error(t, err, "prefetch %v", prefetch)
		assert.ErrorContains(t, err, "fetch JWKS")
	}
}

// A process that never serves MCP (the reconciler, built from the same
// environment in the devstack) does not fetch the JWKS: its start does not
// depend on the issuer being up.
func TestBuildWithoutPrefetchNeverFetchesTheJWKS(t *testing.T) {
	var fetches atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(jwks.Close)
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY": "k",
		"INTENTGATE_JWT_ISSUER":   "https://auth.example.com/",
		"INTENTGATE_JWKS_URL":     jwks.URL + "/jwks.json",
		"INTENTGATE_RESOURCE_URL": "https://mcp.example.com/mcp",
	})
	a, err := Build(context.Background(), cfg, Options{})
	require.NoError(t, err)
	require.NoError(t, a.Close(context.Background()))
	assert.Zero(t, fetches.Load())
}
