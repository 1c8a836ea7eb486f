package auth

import "errors"

var (
	// ErrMissingToken: the request carries no bearer token.
	ErrMissingToken = errors.New("auth: missing bearer token")
	// ErrInvalidToken: a token was presented and refused. Errors returned for
	// refused tokens are *[TokenError] values, which match this with errors.Is.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrKeysUnavailable: the signing keys could not be obtained, so no token
	// can be judged. A server-side fault, not the caller's.
	ErrKeysUnavailable = errors.New("auth: signing keys unavailable")
	// errInsufficientScope: a valid token that lacks the required scope.
	errInsufficientScope = errors.New("auth: token lacks the required scope")
)

// Reject reasons: low-cardinality labels passed to [MiddlewareConfig].OnReject
// and carried by [TokenError], for metrics and logs.
const (
	ReasonMissingToken    = "missing_token"
	ReasonMalformedToken  = "malformed_token"
	ReasonDisallowedAlg   = "disallowed_alg"
	ReasonUnknownKey      = "unknown_key"
	ReasonBadSignature    = "bad_signature"
	ReasonExpired         = "expired"
	ReasonNotYetValid     = "not_yet_valid"
	ReasonWrongIssuer     = "wrong_issuer"
	ReasonWrongAudience   = "wrong_audience"
	ReasonInvalidClaims   = "invalid_claims"
	ReasonGatewayClaims   = "gateway_claims_invalid"
	ReasonKeysUnavailable = "keys_unavailable"
	ReasonGatewayMissing  = "gateway_claims_missing"
	// ReasonInsufficientScope: a valid token without the required scope
	// (HTTP 403, not 401: another token of the same client would do).
	ReasonInsufficientScope = "insufficient_scope"
)

// Descriptions shown to callers. Deliberately coarse: the detailed reason is
// for logs only, and telling an attacker which check failed helps nobody
// legitimate. "expired" is the one distinction a well-behaved client needs.
const (
	descExpired     = "token expired"
	descNotYetValid = "token not yet valid"
	descInvalid     = "token invalid"
)

// TokenError is a refused token. Description is safe to return to the caller;
// Err is the detailed cause and belongs in logs only.
type TokenError struct {
	Reason      string // one of the Reason* constants
	Description string // short, caller-safe
	Err         error  // detailed cause, for logs
}

func (e *TokenError) Error() string {
	if e.Err == nil {
		return "auth: invalid token: " + e.Reason
	}
	return "auth: invalid token: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap makes errors.Is(err, ErrInvalidToken) true and exposes the cause.
func (e *TokenError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidToken}
	}
	return []error{ErrInvalidToken, e.Err}
}

func invalid(reason string, err error) *TokenError {
	desc := descInvalid
	switch reason {
	case ReasonExpired:
		desc = descExpired
	case ReasonNotYetValid:
		desc = descNotYetValid
	}
	return &TokenError{Reason: reason, Description: desc, Err: err}
}

// IsInvalidTokenReason reports whether reason means a token was presented
// and is invalid (forged, for another issuer or audience, malformed, of an
// unknown key). Not: a missing token (every MCP client's first request), an
// expired one (how clients learn to refresh), or keys unavailable (the
// server's fault). What an invalid-token alarm should count.
func IsInvalidTokenReason(reason string) bool {
	switch reason {
	case ReasonMissingToken, ReasonExpired, ReasonKeysUnavailable, ReasonGatewayMissing:
		return false
	}
	return reason != ""
}
