package auth_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/auth/issuer"
)

const resource = "https://mcp.example.test/mcp"

// testIssuer is an issuer served on 127.0.0.1 that counts JWKS fetches and
// can be taken down (every request answered 503) to stage an issuer outage.
type testIssuer struct {
	*issuer.Issuer
	jwksFetches *atomic.Int64
	down        *atomic.Bool
}

// startIssuer serves a fresh issuer whose URL is its own loopback address.
func startIssuer(t *testing.T) testIssuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	iss, err := issuer.New("http://" + ln.Addr().String())
	require.NoError(t, err)
	fetches := new(atomic.Int64)
	down := new(atomic.Bool)
	h := iss.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == issuer.JWKSPath {
			fetches.Add(1)
		}
		if down.Load() {
			http.Error(w, "issuer down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return testIssuer{Issuer: iss, jwksFetches: fetches, down: down}
}

func newVerifier(t *testing.T, iss testIssuer, mutate ...func(*auth.VerifierConfig)) *auth.Verifier {
	t.Helper()
	return startVerifier(t, auth.VerifierConfig{JWKSURL: iss.JWKSURL(), Issuer: iss.URL(), Audience: resource}, mutate...)
}

// startVerifier starts a verifier of cfg, changed by mutate, within 10 s.
func startVerifier(t *testing.T, cfg auth.VerifierConfig, mutate ...func(*auth.VerifierConfig)) *auth.Verifier {
	t.Helper()
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := auth.NewVerifier(ctx, cfg)
	require.NoError(t, err)
	return v
}

// goodClaims are what a well-formed token for this resource carries.
func goodClaims() issuer.Claims {
	return issuer.Claims{
		Subject:    "user-42",
		ClientID:   "agent-client",
		Audience:   resource,
		MerchantID: "merchant-7",
		Roles:      []string{"risk_reviewer", "deployer"},
	}
}

func mint(t *testing.T, iss testIssuer, c issuer.Claims, opts ...issuer.MintOption) string {
	t.Helper()
	tok, err := iss.Mint(c, opts...)
	require.NoError(t, err)
	return tok
}
