package auth_test

import (
	"net/http"
	"testing"

	"github.com/intentgate/intentgate/internal/auth"
)

// With a required scope, the audience alone no longer admits a token: a
// valid token without the scope (in its scope claim, space separated, or
// its scp claim) is refused 403 insufficient_scope, naming the scope to
// ask for (RFC 6750 3.1, MCP authorization), in either mode.
func TestATokenWithoutTheRequiredScopeIsRefused403NamingTheScope(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	with := func(extra map[string]any) string {
		c := goodClaims()
		c.Extra = extra
		return mint(t, iss, c)
	}
	const (
		challenge = `Bearer error="insufficient_scope", scope="intentgate.write", resource_metadata="` + metadataURL + `"`
		body      = `{"error":"insufficient_scope","message":"the token lacks the scope intentgate.write"}`
	)
	gw := func(scope string) map[string]string {
		m := map[string]string{"sub": "gw-user", "client_id": "gw-client", "iss": iss.URL()}
		if scope != "" {
			m["scope"] = scope
		}
		return m
	}
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v, TrustGatewayAuthorizer: true, ResourceMetadataURL: metadataURL, RequiredScope: "intentgate.write"}, []middlewareCase{
		{name: "scope claim", headers: []string{"Bearer " + with(map[string]any{"scope": "openid intentgate.write"})}, wantStatus: http.StatusNoContent},
		{name: "scp array", headers: []string{"Bearer " + with(map[string]any{"scp": []string{"intentgate.write"}})}, wantStatus: http.StatusNoContent},
		{name: "gateway claims", gateway: gw("intentgate.write"), wantStatus: http.StatusNoContent},
		{name: "no scope", headers: []string{"Bearer " + mint(t, iss, goodClaims())}, wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
		{name: "another scope", headers: []string{"Bearer " + with(map[string]any{"scope": "intentgate.read"})}, wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
		{name: "a prefix is not the scope", headers: []string{"Bearer " + with(map[string]any{"scope": "intentgate.writer"})}, wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
		{name: "gateway claims without it", gateway: gw("openid"), wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
	})
}

// Without one, tokens are admitted by issuer and audience as before.
func TestWithoutARequiredScopeATokenWithoutScopesIsAdmitted(t *testing.T) {
	iss := startIssuer(t)
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: newVerifier(t, iss), ResourceMetadataURL: metadataURL}, []middlewareCase{
		{name: "no scope", headers: []string{"Bearer " + mint(t, iss, goodClaims())}, wantStatus: http.StatusNoContent},
	})
}

// A token's scope claim is scope-tokens separated by spaces (RFC 6749
// 3.3, RFC 9068); ',' '[' and ']' are characters of a scope-token. A token
// whose one scope merely contains the required one does not carry it.
func TestAScopeTokenThatOnlyContainsTheRequiredScopeDoesNotCarryIt(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	with := func(scope string) string {
		c := goodClaims()
		c.Extra = map[string]any{"scope": scope}
		return "Bearer " + mint(t, iss, c)
	}
	const (
		challenge = `Bearer error="insufficient_scope", scope="intentgate.write", resource_metadata="` + metadataURL + `"`
		body      = `{"error":"insufficient_scope","message":"the token lacks the scope intentgate.write"}`
	)
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: v, ResourceMetadataURL: metadataURL, RequiredScope: "intentgate.write"}, []middlewareCase{
		{name: "comma inside one scope-token", headers: []string{with("intentgate.read,intentgate.write")}, wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
		{name: "brackets inside one scope-token", headers: []string{with("[intentgate.write]")}, wantStatus: http.StatusForbidden,
			wantAuthn: challenge, wantBody: body, wantReason: auth.ReasonInsufficientScope},
	})
}

// And a required scope with a ',' (a legal scope character, which API
// Gateway's authorizer matches whole) is found in a token carrying it.
func TestARequiredScopeWithACommaIsFoundInATokenCarryingIt(t *testing.T) {
	iss := startIssuer(t)
	c := goodClaims()
	c.Extra = map[string]any{"scope": "openid billing,write"}
	runMiddlewareCases(t, auth.MiddlewareConfig{Verifier: newVerifier(t, iss), ResourceMetadataURL: metadataURL, RequiredScope: "billing,write"}, []middlewareCase{
		{name: "the token carries billing,write", headers: []string{"Bearer " + mint(t, iss, c)}, wantStatus: http.StatusNoContent},
	})
}
