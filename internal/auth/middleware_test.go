package auth_test

import (
	"context"
	"time"

	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/auth/issuer"
)

const metadataURL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"

// recorder is a next handler that remembers whether and how it was called.
type recorder struct {
	called        bool
	subject       auth.Subject
	hasSubject    bool
	authorization string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.called = true
	rec.subject, rec.hasSubject = auth.SubjectFrom(r.Context())
	rec.authorization = r.Header.Get("Authorization")
	w.WriteHeader(http.StatusNoContent)
}

type middlewareCase struct {
	name       string
	headers    []string          // Authorization header values
	gateway    map[string]string // claims the Lambda adapter would store
	wantStatus int
	wantAuthn  string // exact WWW-Authenticate
	wantBody   string // exact JSON
	wantReason string // OnReject argument, "" when accepted
}

func runMiddlewareCases(t *testing.T, cfg auth.MiddlewareConfig, tests []middlewareCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var reasons []string
			cfg := cfg
			cfg.OnReject = func(_ context.Context, reason string) { reasons = append(reasons, reason) }
			next := &recorder{}
			h := auth.Middleware(cfg)(next)

			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for _, v := range tc.headers {
				req.Header.Add("Authorization", v)
			}
			if tc.gateway != nil {
				req = req.WithContext(auth.WithGatewayClaims(req.Context(), tc.gateway))
			}
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)

			assert.Equal(t, tc.wantStatus, rr.Code)
			if tc.wantReason == "" {
				assert.True(t, next.called)
				assert.True(t, next.hasSubject)
				assert.Empty(t, next.authorization, "the caller's token must not travel past the middleware")
				assert.Empty(t, reasons)
				return
			}
			assert.False(t, next.called, "next must never run for a rejected request")
			assert.Equal(t, []string{tc.wantReason}, reasons)
			assert.Equal(t, tc.wantAuthn, rr.Header().Get("WWW-Authenticate"))
			assert.Equal(t, "application/json", rr.Header().Get("Content-Type"))
			assert.Equal(t, "no-store", rr.Header().Get("Cache-Control"))
			assert.JSONEq(t, tc.wantBody, rr.Body.String())
		})
	}
}

func TestMiddlewareAnswers401WithChallenge(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	good := mint(t, iss, goodClaims())
	expired := mint(t, iss, goodClaims(), issuer.Expired())
	unsigned := iss.MintUnsigned(goodClaims())

	const (
		missingChallenge = `Bearer resource_metadata="` + metadataURL + `"`
		missingBody      = `{"error":"unauthenticated","message":"missing bearer token"}`
		invalidChallenge = `Bearer error="invalid_token", error_description="token invalid", resource_metadata="` + metadataURL + `"`
		invalidBody      = `{"error":"unauthenticated","message":"token invalid"}`
	)
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v, ResourceMetadataURL: metadataURL}, []middlewareCase{
		{name: "valid token", headers: []string{"Bearer " + good}, wantStatus: http.StatusNoContent},
		{name: "scheme is case-insensitive", headers: []string{"bearer " + good}, wantStatus: http.StatusNoContent},
		{name: "no Authorization header", wantStatus: 401, wantAuthn: missingChallenge, wantBody: missingBody, wantReason: auth.ReasonMissingToken},
		{name: "other scheme", headers: []string{"Basic dXNlcjpwYXNz"}, wantStatus: 401, wantAuthn: missingChallenge, wantBody: missingBody, wantReason: auth.ReasonMissingToken},
		{name: "empty bearer", headers: []string{"Bearer "}, wantStatus: 401, wantAuthn: missingChallenge, wantBody: missingBody, wantReason: auth.ReasonMissingToken},
		{
			name: "expired", headers: []string{"Bearer " + expired}, wantStatus: 401,
			wantAuthn:  `Bearer error="invalid_token", error_description="token expired", resource_metadata="` + metadataURL + `"`,
			wantBody:   `{"error":"unauthenticated","message":"token expired"}`,
			wantReason: auth.ReasonExpired,
		},
		{name: "alg none", headers: []string{"Bearer " + unsigned}, wantStatus: 401, wantAuthn: invalidChallenge, wantBody: invalidBody, wantReason: auth.ReasonDisallowedAlg},
		{name: "garbage", headers: []string{"Bearer x.y.z"}, wantStatus: 401, wantAuthn: invalidChallenge, wantBody: invalidBody, wantReason: auth.ReasonMalformedToken},
		{name: "two credentials", headers: []string{"Bearer " + good + " extra"}, wantStatus: 401, wantAuthn: invalidChallenge, wantBody: invalidBody, wantReason: auth.ReasonMalformedToken},
		{name: "two Authorization headers", headers: []string{"Bearer " + good, "Bearer " + good}, wantStatus: 401, wantAuthn: invalidChallenge, wantBody: invalidBody, wantReason: auth.ReasonMalformedToken},
	})
}

func TestMiddlewareChallengeWithoutMetadataURL(t *testing.T) {
	v := newVerifier(t, startIssuer(t))
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v}, []middlewareCase{
		{name: "missing", wantStatus: 401, wantAuthn: `Bearer`, wantBody: `{"error":"unauthenticated","message":"missing bearer token"}`, wantReason: auth.ReasonMissingToken},
		{name: "invalid", headers: []string{"Bearer x"}, wantStatus: 401, wantAuthn: `Bearer error="invalid_token", error_description="token invalid"`, wantBody: `{"error":"unauthenticated","message":"token invalid"}`, wantReason: auth.ReasonMalformedToken},
	})
}

func TestMiddlewarePutsVerifiedSubjectInContext(t *testing.T) {
	iss := startIssuer(t)
	next := &recorder{}
	h := auth.Middleware(auth.MiddlewareConfig{Verifier: newVerifier(t, iss)})(next)
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+mint(t, iss, goodClaims()))
	h.ServeHTTP(httptest.NewRecorder(), req)

	require.True(t, next.called)
	assert.Equal(t, auth.Subject{ClientID: "agent-client", UserID: "user-42", MerchantID: "merchant-7",
		Roles: []string{"risk_reviewer", "deployer"}, Issuer: iss.URL()}, next.subject)
	assert.NotEmpty(t, req.Header.Get("Authorization"), "the caller's request is not mutated")
}

func TestMiddlewareUsesGatewayClaimsOnlyWhenTrusted(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	good := mint(t, iss, goodClaims())
	gw := map[string]string{"sub": "gw-user", "client_id": "gw-client", "iss": iss.URL(), "merchant_id": "m9", "roles": "[a b]"}
	forgedIssuer := map[string]string{"sub": "gw-user", "client_id": "gw-client", "iss": "https://evil.example"}
	noClient := map[string]string{"sub": "gw-user", "iss": iss.URL()}
	const missing = `Bearer resource_metadata="` + metadataURL + `"`
	const invalid = `Bearer error="invalid_token", error_description="token invalid", resource_metadata="` + metadataURL + `"`
	missingBody := `{"error":"unauthenticated","message":"missing bearer token"}`
	invalidBody := `{"error":"unauthenticated","message":"token invalid"}`

	t.Run("not trusted: claims ignored", func(t *testing.T) {
		runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v, ResourceMetadataURL: metadataURL}, []middlewareCase{
			{name: "claims without token", gateway: gw, wantStatus: 401, wantAuthn: missing, wantBody: missingBody, wantReason: auth.ReasonMissingToken},
			{name: "claims with bad token", gateway: gw, headers: []string{"Bearer x"}, wantStatus: 401, wantAuthn: invalid, wantBody: invalidBody, wantReason: auth.ReasonMalformedToken},
		})
	})
	t.Run("trusted with verifier", func(t *testing.T) {
		runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v, TrustGatewayAuthorizer: true, ResourceMetadataURL: metadataURL}, []middlewareCase{
			{name: "claims", gateway: gw, wantStatus: http.StatusNoContent},
			{name: "no claims falls back to the bearer", headers: []string{"Bearer " + good}, wantStatus: http.StatusNoContent},
			{name: "no claims, no bearer", wantStatus: 401, wantAuthn: missing, wantBody: missingBody, wantReason: auth.ReasonMissingToken},
			{name: "claims from another issuer", gateway: forgedIssuer, wantStatus: 401, wantAuthn: invalid, wantBody: invalidBody, wantReason: auth.ReasonGatewayClaims},
			{name: "claims without client principal", gateway: noClient, wantStatus: 401, wantAuthn: invalid, wantBody: invalidBody, wantReason: auth.ReasonGatewayClaims},
		})
	})
	t.Run("trusted without verifier", func(t *testing.T) {
		runMiddlewareCases(t, auth.MiddlewareConfig{TrustGatewayAuthorizer: true, ResourceMetadataURL: metadataURL}, []middlewareCase{
			{name: "claims", gateway: gw, wantStatus: http.StatusNoContent},
			{name: "no claims, even with a valid bearer", headers: []string{"Bearer " + good}, wantStatus: 401, wantAuthn: missing, wantBody: missingBody, wantReason: auth.ReasonGatewayMissing},
		})
	})
	t.Run("subject comes from the claims", func(t *testing.T) {
		next := &recorder{}
		h := auth.Middleware(auth.MiddlewareConfig{TrustGatewayAuthorizer: true})(next)
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		h.ServeHTTP(httptest.NewRecorder(), req.WithContext(auth.WithGatewayClaims(req.Context(), gw)))
		require.True(t, next.called)
		assert.Equal(t, auth.Subject{ClientID: "gw-client", UserID: "gw-user", MerchantID: "m9", Roles: []string{"a", "b"}, Issuer: iss.URL()}, next.subject)
	})
}

func TestMiddlewarePanicsWithoutAnyWayToAuthenticate(t *testing.T) {
	assert.Panics(t, func() { auth.Middleware(auth.MiddlewareConfig{}) })
}

// During an issuer outage a token whose kid is not cached can not be judged:
// the key may well exist at the issuer. The middleware answers 503 (retry
// later, keep the token), never 401 invalid_token, and keeps doing so while
// forced refreshes are rate limited; tokens with cached keys still pass, and
// once the issuer is back the new key is picked up.
func TestMiddlewareAnswers503ForUnknownKidDuringJWKSOutage(t *testing.T) {
	const unavailableBody = `{"error":"auth_unavailable","message":"authentication is temporarily unavailable"}`
	serve := func(t *testing.T, h http.Handler, token string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		return rr
	}

	t.Run("refresh fails, then is rate limited", func(t *testing.T) {
		iss := startIssuer(t)
		v := newVerifier(t, iss) // default MinRefreshInterval: the second request may not refresh
		cached := mint(t, iss, goodClaims())
		require.NoError(t, iss.Rotate())
		rotated := mint(t, iss, goodClaims())
		iss.down.Store(true)

		var reasons []string
		h := auth.Middleware(auth.MiddlewareConfig{Verifier: v, ResourceMetadataURL: metadataURL,
			OnReject: func(_ context.Context, r string) { reasons = append(reasons, r) }})(&recorder{})
		for range 2 {
			rr := serve(t, h, rotated)
			assert.Equal(t, http.StatusServiceUnavailable, rr.Code)
			assert.Empty(t, rr.Header().Get("WWW-Authenticate"), "no invalid_token challenge: the token may be fine")
			assert.Equal(t, "5", rr.Header().Get("Retry-After"))
			assert.JSONEq(t, unavailableBody, rr.Body.String())
		}
		assert.Equal(t, []string{auth.ReasonKeysUnavailable, auth.ReasonKeysUnavailable}, reasons)
		assert.Equal(t, http.StatusNoContent, serve(t, h, cached).Code, "cached keys keep verifying during the outage")
	})

	t.Run("issuer back: the rotated key verifies", func(t *testing.T) {
		iss := startIssuer(t)
		v := newVerifier(t, iss, func(c *auth.VerifierConfig) { c.MinRefreshInterval = time.Nanosecond })
		require.NoError(t, iss.Rotate())
		rotated := mint(t, iss, goodClaims())
		h := auth.Middleware(auth.MiddlewareConfig{Verifier: v})(&recorder{})

		iss.down.Store(true)
		assert.Equal(t, http.StatusServiceUnavailable, serve(t, h, rotated).Code)
		iss.down.Store(false)
		assert.Equal(t, http.StatusNoContent, serve(t, h, rotated).Code)
	})
}
