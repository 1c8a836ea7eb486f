package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// MiddlewareConfig configures [Middleware].
type MiddlewareConfig struct {
	// Verifier verifies bearer tokens. Required unless TrustGatewayAuthorizer
	// is set; with both, the Verifier handles requests that arrive without
	// gateway claims, and its issuer is cross-checked against gateway claims.
	Verifier *Verifier
	// TrustGatewayAuthorizer makes the middleware accept claims stored by
	// [WithGatewayClaims] instead of verifying the bearer. Read the trust
	// assumption on WithGatewayClaims before setting it.
	TrustGatewayAuthorizer bool
	// Claims names the merchant and roles claims for the gateway path.
	// Zero value: the Verifier's names if there is one, else the defaults.
	Claims ClaimNames
	// ResourceMetadataURL is the RFC 9728 metadata URL put in every
	// WWW-Authenticate challenge (see [ResourceMetadataURL]).
	ResourceMetadataURL string
	// RequiredScope, when set, is an OAuth scope every token must carry
	// (its scope or scp claim); a valid token without it is refused 403
	// insufficient_scope. Empty: the audience alone admits a token.
	RequiredScope string
	// Logger records each rejection with its detailed reason (never the
	// token). Default: discarded.
	Logger *slog.Logger
	// OnReject, if set, is called once per rejected request with the
	// request's context and one of the Reason* constants, e.g. to count auth
	// rejections.
	OnReject func(ctx context.Context, reason string)
}

// Middleware authenticates every request before next sees it. On success the
// [Subject] is in the request context ([SubjectFrom]) and the Authorization
// header is removed from the request handed to next, so nothing downstream
// can forward the caller's token. On failure next is never called:
//
//   - no bearer token: 401, WWW-Authenticate: Bearer resource_metadata="<url>"
//   - refused token: 401, WWW-Authenticate: Bearer error="invalid_token",
//     error_description="<short>", resource_metadata="<url>"
//   - keys unobtainable (issuer outage): 503; the token may be fine, so the
//     client must not be told to discard it.
//
// Bodies are JSON: {"error":"unauthenticated","message":"<short>"} (503:
// "error":"auth_unavailable"). Only the Authorization header is read; tokens
// in query strings or bodies are ignored.
//
// Middleware panics if cfg has neither a Verifier nor TrustGatewayAuthorizer:
// that is a wiring error which must not degrade into "everyone is refused"
// or, worse, "nobody is checked".
func Middleware(cfg MiddlewareConfig) func(http.Handler) http.Handler {
	if cfg.Verifier == nil && !cfg.TrustGatewayAuthorizer {
		panic("auth.Middleware: config needs a Verifier or TrustGatewayAuthorizer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Claims == (ClaimNames{}) && cfg.Verifier != nil {
		cfg.Claims = cfg.Verifier.names
	}
	cfg.Claims = cfg.Claims.withDefaults()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := cfg.authenticate(r)
			if err == nil && cfg.RequiredScope != "" && !slices.Contains(s.Scopes, cfg.RequiredScope) {
				err = errInsufficientScope
			}
			if err != nil {
				cfg.reject(w, r, err)
				return
			}
			r = r.WithContext(WithSubject(r.Context(), s))
			r.Header = r.Header.Clone()
			r.Header.Del("Authorization")
			next.ServeHTTP(w, r)
		})
	}
}

// errGatewayClaimsMissing: trusted-gateway mode without a Verifier got a
// request with no authorizer claims, so it was reached around the authorizer.
var errGatewayClaimsMissing = errors.New("no API Gateway authorizer claims in request context and no Verifier configured")

func (cfg MiddlewareConfig) authenticate(r *http.Request) (Subject, error) {
	ctx := r.Context()
	if cfg.TrustGatewayAuthorizer {
		if claims, ok := GatewayClaimsFrom(ctx); ok {
			return cfg.subjectFromGateway(claims)
		}
		if cfg.Verifier == nil {
			return Subject{}, errGatewayClaimsMissing
		}
	}
	token, err := bearerToken(r)
	if err != nil {
		return Subject{}, err
	}
	return cfg.Verifier.Verify(ctx, token)
}

func (cfg MiddlewareConfig) subjectFromGateway(claims map[string]string) (Subject, error) {
	m := make(map[string]any, len(claims))
	for k, v := range claims {
		m[k] = v
	}
	s, err := SubjectFromClaims(m, cfg.Claims)
	if err != nil {
		return Subject{}, &TokenError{Reason: ReasonGatewayClaims, Description: descInvalid, Err: err}
	}
	// Defence in depth: the authorizer should already enforce the issuer.
	if cfg.Verifier != nil && s.Issuer != cfg.Verifier.Issuer() {
		return Subject{}, &TokenError{Reason: ReasonGatewayClaims, Description: descInvalid,
			Err: fmt.Errorf("gateway claims issuer %q, want %q", s.Issuer, cfg.Verifier.Issuer())}
	}
	return s, nil
}

// bearerToken extracts the RFC 6750 header credential. A non-Bearer scheme
// counts as no token (the challenge then tells the client what to send).
func bearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", ErrMissingToken
	}
	if len(values) > 1 {
		return "", invalid(ReasonMalformedToken, errors.New("more than one Authorization header"))
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMissingToken
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", ErrMissingToken
	}
	if strings.ContainsAny(token, " \t") {
		return "", invalid(ReasonMalformedToken, errors.New("Authorization header has more than one credential"))
	}
	return token, nil
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (cfg MiddlewareConfig) reject(w http.ResponseWriter, r *http.Request, err error) {
	var (
		reason  string
		status  = http.StatusUnauthorized
		body    = errorBody{Error: "unauthenticated"}
		level   = slog.LevelInfo
		params  []string
		tokErr  *TokenError
		hdr     = w.Header()
		metaURL = cfg.ResourceMetadataURL
	)
	switch {
	case errors.Is(err, ErrMissingToken):
		reason, body.Message = ReasonMissingToken, "missing bearer token"
	case errors.Is(err, errGatewayClaimsMissing):
		// The function was reached around the authorizer: misrouting, loud.
		reason, body.Message, level = ReasonGatewayMissing, "missing bearer token", slog.LevelError
	case errors.Is(err, errInsufficientScope):
		// RFC 6750 3.1 and MCP authorization: 403 with the scope to ask for.
		reason, status = ReasonInsufficientScope, http.StatusForbidden
		body = errorBody{Error: "insufficient_scope", Message: "the token lacks the scope " + cfg.RequiredScope}
		params = append(params, `error="insufficient_scope"`, "scope="+quote(cfg.RequiredScope))
	case errors.As(err, &tokErr):
		reason, body.Message = tokErr.Reason, tokErr.Description
		params = append(params, `error="invalid_token"`, "error_description="+quote(tokErr.Description))
	default:
		// ErrKeysUnavailable and anything unforeseen: our fault, not the token's.
		reason, status, level = ReasonKeysUnavailable, http.StatusServiceUnavailable, slog.LevelError
		body = errorBody{Error: "auth_unavailable", Message: "authentication is temporarily unavailable"}
	}
	cfg.Logger.LogAttrs(r.Context(), level, "auth: request rejected",
		slog.String("reason", reason),
		slog.String("error", err.Error()),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
	)
	if cfg.OnReject != nil {
		cfg.OnReject(r.Context(), reason)
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		if metaURL != "" {
			params = append(params, "resource_metadata="+quote(metaURL))
		}
		challenge := "Bearer"
		if len(params) > 0 {
			challenge += " " + strings.Join(params, ", ")
		}
		hdr.Set("WWW-Authenticate", challenge)
	} else {
		hdr.Set("Retry-After", "5")
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client went away; nothing to do
}

// quote renders an RFC 9110 quoted-string.
func quote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}
