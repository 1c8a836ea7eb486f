package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// An issuer that signs with ES256 only can never pass API Gateway's JWT
// authorizer (RSA only): in gateway mode the MCP function refuses to start
// with a message saying so, instead of answering every call with 401.
func TestGatewayModeRefusesAnIssuerWithoutRSAKeys(t *testing.T) {
	ecOnly := ecOnlyJWKS(t)
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	both := httptest.NewServer(iss.Handler())
	t.Cleanup(both.Close)

	for name, tc := range map[string]struct {
		jwks, mode string
		wantErr    string
	}{
		"gateway mode, EC-only issuer": {jwks: ecOnly.URL, mode: "true", wantErr: "needs an issuer signing with RSA"},
		"gateway mode, RSA issuer":     {jwks: both.URL + issuer.JWKSPath, mode: "true"},
		"server mode, EC-only issuer":  {jwks: ecOnly.URL, mode: "false"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := engineConfig(t, map[string]string{
				"INTENTGATE_JWT_ISSUER": "https://auth.example.com/", "INTENTGATE_JWKS_URL": tc.jwks,
				"INTENTGATE_TRUST_GATEWAY_AUTHORIZER": tc.mode, "INTENTGATE_RESOURCE_URL": "https://mcp.example.com/mcp",
				"INTENTGATE_RISK_API_KEY": "k",
			})
			a, err := Build(context.Background(), cfg, Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = a.Close(context.Background()) })
			_, err = a.Handler(context.Background())
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func ecOnlyJWKS(t *testing.T) *httptest.Server {
	t.Helper()
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	ec, ok := iss.PublicJWKS().Key(iss.KeyID(issuer.ES256))
	require.True(t, ok)
	body, err := json.Marshal(issuer.JWKS{Keys: []issuer.JWK{ec}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
