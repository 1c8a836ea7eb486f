package app

import (
	"context"
	"maps"
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
	h := originTestHandler(t, nil)

	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://claude.ai": http.StatusForbidden, "": http.StatusUnauthorized} {
		code, body := postToolsList(h, origin)
		assert.Equal(t, want, code, "Origin %q: %s", origin, body)
	}
}

// A hosted client whose backend sends its own web origin (an assistant's
// connector, say) is served once the operator trusts that origin
// (INTENTGATE_TRUSTED_ORIGINS): it is then asked for its token like any
// other caller, and every other foreign origin is still refused.
func TestATrustedOriginIsServedAndOthersStillForbidden(t *testing.T) {
	h := originTestHandler(t, map[string]string{"INTENTGATE_TRUSTED_ORIGINS": "https://claude.ai, https://chat.example.com:8443"})

	for origin, want := range map[string]int{
		"https://claude.ai":             http.StatusUnauthorized,
		"https://chat.example.com:8443": http.StatusUnauthorized,
		"https://chat.example.com":      http.StatusForbidden, // another port is another origin
		"https://evil.example":          http.StatusForbidden,
	} {
		code, body := postToolsList(h, origin)
		assert.Equal(t, want, code, "Origin %q: %s", origin, body)
	}
}

func TestATrustedOriginThatIsNotAnOriginStopsTheStart(t *testing.T) {
	for _, bad := range []string{"claude.ai", "https://claude.ai/app", "ftp://x.example", "https://"} {
		_, err := FromEnv(mapLookup(map[string]string{"INTENTGATE_TRUSTED_ORIGINS": bad}))
		assert.ErrorContains(t, err, "INTENTGATE_TRUSTED_ORIGINS", bad)
	}
}

// originTestHandler is the MCP function's handler with a local issuer and
// env on top of the test engine's configuration.
func originTestHandler(t *testing.T, env map[string]string) http.Handler {
	t.Helper()
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := httptest.NewServer(iss.Handler())
	t.Cleanup(jwks.Close)
	vars := map[string]string{
		"INTENTGATE_JWT_ISSUER": "https://auth.example.com/", "INTENTGATE_JWKS_URL": jwks.URL + issuer.JWKSPath,
		"INTENTGATE_RESOURCE_URL": "https://mcp.example.com/mcp", "INTENTGATE_RISK_API_KEY": "k",
	}
	maps.Copy(vars, env)
	a, err := Build(context.Background(), engineConfig(t, vars), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	h, err := a.Handler(context.Background())
	require.NoError(t, err)
	return h
}

// postToolsList posts a tools/list without a token from origin ("": no
// Origin header) and returns the status and body.
func postToolsList(h http.Handler, origin string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}
