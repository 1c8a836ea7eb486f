package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// "If the Origin header is present and invalid, servers MUST respond with
// HTTP 403 Forbidden" (Streamable HTTP, 2025-11-25 and 2026-07-28): the
// MCP endpoint refuses a foreign Origin before authentication, so such a
// request is answered 403 whatever its token, and one without Origin is
// still asked for its token (401).
func TestAForeignOriginIsForbiddenBeforeAuthentication(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := httptest.NewServer(iss.Handler())
	t.Cleanup(jwks.Close)
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_JWT_ISSUER": "https://auth.example.com/", "INTENTGATE_JWKS_URL": jwks.URL + issuer.JWKSPath,
		"INTENTGATE_RESOURCE_URL": "https://mcp.example.com/mcp", "INTENTGATE_RISK_API_KEY": "k",
	})
	a, err := Build(context.Background(), cfg, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	h, err := a.Handler(context.Background())
	require.NoError(t, err)

	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "": http.StatusUnauthorized} {
		req := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, want, rec.Code, "Origin %q: %s", origin, rec.Body)
	}
}
