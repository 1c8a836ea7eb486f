package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/intentgate/intentgate/internal/operation"
)

// Default claim names.
const (
	DefaultMerchantClaim = "merchant_id"
	DefaultRolesClaim    = "roles"
)

// maxPrincipalLen bounds identifiers that end up in storage keys and logs:
// what a request key's principal may be, so a caller that authenticates
// can also write.
const maxPrincipalLen = operation.MaxPrincipalLen

// ClaimNames says which claims carry the merchant and the roles. Empty fields
// take the defaults ("merchant_id", "roles").
type ClaimNames struct {
	MerchantClaim string
	RolesClaim    string
}

func (n ClaimNames) withDefaults() ClaimNames {
	if n.MerchantClaim == "" {
		n.MerchantClaim = DefaultMerchantClaim
	}
	if n.RolesClaim == "" {
		n.RolesClaim = DefaultRolesClaim
	}
	return n
}

// SubjectFromClaims builds a Subject from already-verified claims. It does
// NOT check signature, issuer, audience or lifetime: callers are either
// [Verifier.Verify] (which has) or the API Gateway path (where the JWT
// authorizer has, see [WithGatewayClaims]).
//
// sub is required (end-user principal); client_id, else azp, is required
// (client principal). Values may be JSON-typed (from a decoded JWT) or all
// strings (API Gateway flattens claims to strings). Roles may be an array of
// strings, a space-separated string "a b", or API Gateway's rendering of an
// array, "[a b]" (a JSON array inside the string is also accepted).
func SubjectFromClaims(claims map[string]any, names ClaimNames) (Subject, error) {
	names = names.withDefaults()
	var s Subject
	var err error
	if s.UserID, err = principalClaim(claims, "sub"); err != nil {
		return Subject{}, err
	}
	if s.UserID == "" {
		return Subject{}, errors.New("claim sub is missing")
	}
	if s.ClientID, err = principalClaim(claims, "client_id"); err != nil {
		return Subject{}, err
	}
	if s.ClientID == "" {
		if s.ClientID, err = principalClaim(claims, "azp"); err != nil {
			return Subject{}, err
		}
	}
	if s.ClientID == "" {
		return Subject{}, errors.New("no client principal: claims client_id and azp are both missing")
	}
	if s.MerchantID, err = principalClaim(claims, names.MerchantClaim); err != nil {
		return Subject{}, err
	}
	if s.Issuer, err = principalClaim(claims, "iss"); err != nil {
		return Subject{}, err
	}
	if s.Roles, err = rolesClaim(claims[names.RolesClaim]); err != nil {
		return Subject{}, fmt.Errorf("claim %s: %w", names.RolesClaim, err)
	}
	s.Scopes = scopesClaim(claims)
	return s, nil
}

// principalClaim returns a string claim ("" when absent), refusing other
// types and values unfit to be an identifier.
func principalClaim(claims map[string]any, name string) (string, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("claim %s is %T, want string", name, v)
	}
	if err := checkIdentifier(s); err != nil {
		return "", fmt.Errorf("claim %s: %w", name, err)
	}
	return s, nil
}

func checkIdentifier(s string) error {
	if len(s) > maxPrincipalLen {
		return fmt.Errorf("longer than %d bytes", maxPrincipalLen)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return errors.New("contains control characters")
	}
	return nil
}

// scopesClaim reads the token's scopes: scope (RFC 9068: space-separated),
// else scp (an array, or API Gateway's rendering of one). A value of
// another type carries no scope, so a required scope is refused rather
// than the whole token.
func scopesClaim(claims map[string]any) []string {
	var raw []string
	if scope, ok := claims["scope"]; ok {
		// Scope-tokens are separated by spaces alone: ',', '[' and ']' are
		// characters of a scope-token.
		if s, ok := scope.(string); ok {
			raw = strings.Fields(s)
		}
		return uniqueScopes(raw)
	}
	switch v := claims["scp"].(type) {
	case string:
		raw = splitRoles(v) // an array, or API Gateway's "[a b]" rendering of one
	case []string:
		raw = v
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	return uniqueScopes(raw)
}

func uniqueScopes(raw []string) []string {
	var scopes []string
	for _, sc := range raw {
		if sc = strings.TrimSpace(sc); sc != "" && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	return scopes
}

func rolesClaim(v any) ([]string, error) {
	var raw []string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		raw = splitRoles(v)
	case []string:
		raw = v
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is %T, want string", i, e)
			}
			raw = append(raw, s)
		}
	default:
		return nil, fmt.Errorf("is %T, want array of strings or string", v)
	}
	var roles []string
	seen := make(map[string]bool, len(raw))
	for _, r := range raw {
		r = strings.TrimSpace(r)
		if r == "" || seen[r] {
			continue
		}
		if err := checkIdentifier(r); err != nil {
			return nil, fmt.Errorf("role %q: %w", r, err)
		}
		seen[r] = true
		roles = append(roles, r)
	}
	return roles, nil
}

// splitRoles parses the string forms: `a b`, `[a b]` (API Gateway's rendering
// of an array claim) and `["a","b"]`. Commas also separate, so `[a, b]` works.
func splitRoles(s string) []string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		var arr []string
		if err := json.Unmarshal([]byte(s), &arr); err == nil {
			return arr
		}
		s = s[1 : len(s)-1]
	}
	return strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == ',' })
}

type gatewayClaimsKey struct{}

// WithGatewayClaims stores the claims API Gateway's JWT authorizer verified
// (requestContext.authorizer.jwt.claims in the HTTP API v2 event). The Lambda
// adapter calls it; [Middleware] uses them only when
// MiddlewareConfig.TrustGatewayAuthorizer is true.
//
// Trust assumption: these claims are believed without any check of signature,
// issuer, audience or lifetime. That is sound only when the function can be
// reached solely through an API Gateway route that has a JWT authorizer
// configured for the same issuer and audience this server would enforce
// (no function URL, no other trigger, no route without the authorizer).
// Anything else that can invoke the function can forge an identity.
func WithGatewayClaims(ctx context.Context, claims map[string]string) context.Context {
	return context.WithValue(ctx, gatewayClaimsKey{}, maps.Clone(claims))
}

// GatewayClaimsFrom returns the claims stored by [WithGatewayClaims].
func GatewayClaimsFrom(ctx context.Context) (map[string]string, bool) {
	c, ok := ctx.Value(gatewayClaimsKey{}).(map[string]string)
	return c, ok && c != nil
}
