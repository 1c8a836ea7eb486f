package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A JWKS outage is the server's fault: 503, no challenge, so the client keeps
// its (possibly fine) token. It cannot be provoked end to end once a Verifier
// holds keys (failed refreshes keep the last good set), so the response path
// is tested directly.
func TestRejectWhenKeysUnavailableIs503WithoutChallenge(t *testing.T) {
	var reasons []string
	cfg := MiddlewareConfig{
		ResourceMetadataURL: "https://x.test/.well-known/oauth-protected-resource",
		Logger:              slog.New(slog.DiscardHandler),
		OnReject:            func(_ context.Context, r string) { reasons = append(reasons, r) },
	}
	rr := httptest.NewRecorder()
	cfg.reject(rr, httptest.NewRequest(http.MethodPost, "/mcp", nil), fmt.Errorf("%w: boom", ErrKeysUnavailable))

	assert.Equal(t, http.StatusServiceUnavailable, rr.Code)
	assert.Empty(t, rr.Header().Get("WWW-Authenticate"))
	assert.Equal(t, "5", rr.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"error":"auth_unavailable","message":"authentication is temporarily unavailable"}`, rr.Body.String())
	assert.Equal(t, []string{ReasonKeysUnavailable}, reasons)
}

func TestQuoteEscapesQuotedString(t *testing.T) {
	assert.Equal(t, `"a\"b\\c"`, quote(`a"b\c`))
}
