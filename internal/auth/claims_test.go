package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

func TestSubjectFromClaimsReadsBothPrincipals(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"sub": "u1", "client_id": "c1", "iss": "https://issuer.example", "merchant_id": "m1"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name      string
		claims    map[string]any
		names     auth.ClaimNames
		wantRoles []string
		wantCli   string
	}{
		{"JSON array roles", base(map[string]any{"roles": []any{"a", "b"}}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"space-separated roles", base(map[string]any{"roles": "a  b"}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"API Gateway array rendering", base(map[string]any{"roles": "[a b]"}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"API Gateway rendering with commas", base(map[string]any{"roles": "[a, b]"}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"JSON array inside a string", base(map[string]any{"roles": `["a","b"]`}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"empty rendering", base(map[string]any{"roles": "[]"}), auth.ClaimNames{}, nil, "c1"},
		{"duplicates dropped", base(map[string]any{"roles": []string{"a", "a", "b"}}), auth.ClaimNames{}, []string{"a", "b"}, "c1"},
		{"no roles", base(nil), auth.ClaimNames{}, nil, "c1"},
		{"custom roles claim", base(map[string]any{"cognito:groups": "[ops]", "roles": "ignored"}), auth.ClaimNames{RolesClaim: "cognito:groups"}, []string{"ops"}, "c1"},
		{"azp when no client_id", base(map[string]any{"client_id": nil, "azp": "c2"}), auth.ClaimNames{}, nil, "c2"},
		{"client_id wins over azp", base(map[string]any{"azp": "c2"}), auth.ClaimNames{}, nil, "c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := auth.SubjectFromClaims(tc.claims, tc.names)
			require.NoError(t, err)
			assert.Equal(t, tc.wantRoles, s.Roles)
			assert.Equal(t, tc.wantCli, s.ClientID)
			assert.Equal(t, "u1", s.UserID)
			assert.Equal(t, "m1", s.MerchantID)
			assert.Equal(t, "https://issuer.example", s.Issuer)
		})
	}
}

func TestSubjectFromClaimsRefusesUnusableClaims(t *testing.T) {
	tests := []struct {
		name   string
		claims map[string]any
	}{
		{"no sub", map[string]any{"client_id": "c"}},
		{"empty sub", map[string]any{"sub": "", "client_id": "c"}},
		{"no client principal", map[string]any{"sub": "u"}},
		{"sub not a string", map[string]any{"sub": 42.0, "client_id": "c"}},
		{"merchant not a string", map[string]any{"sub": "u", "client_id": "c", "merchant_id": 7.0}},
		{"roles an object", map[string]any{"sub": "u", "client_id": "c", "roles": map[string]any{}}},
		{"role not a string", map[string]any{"sub": "u", "client_id": "c", "roles": []any{"a", 1.0}}},
		{"control character in sub", map[string]any{"sub": "u\n2", "client_id": "c"}},
		{"oversized client id", map[string]any{"sub": "u", "client_id": strings.Repeat("c", 600)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.SubjectFromClaims(tc.claims, auth.ClaimNames{})
			assert.Error(t, err)
		})
	}
}

func TestSubjectHasRole(t *testing.T) {
	s := auth.Subject{Roles: []string{"risk_reviewer"}}
	assert.True(t, s.HasRole("risk_reviewer"))
	assert.False(t, s.HasRole("Risk_Reviewer"))
	assert.False(t, auth.Subject{}.HasRole(""))
}

func TestSubjectAndGatewayClaimsRoundTripThroughContext(t *testing.T) {
	ctx := context.Background()
	_, ok := auth.SubjectFrom(ctx)
	assert.False(t, ok)
	_, ok = auth.GatewayClaimsFrom(ctx)
	assert.False(t, ok)

	want := auth.Subject{ClientID: "c", UserID: "u"}
	got, ok := auth.SubjectFrom(auth.WithSubject(ctx, want))
	require.True(t, ok)
	assert.Equal(t, want, got)

	claims := map[string]string{"sub": "u"}
	ctx = auth.WithGatewayClaims(ctx, claims)
	claims["sub"] = "changed later"
	stored, ok := auth.GatewayClaimsFrom(ctx)
	require.True(t, ok)
	assert.Equal(t, "u", stored["sub"], "stored claims are a copy")
}

// An invalid-token alarm counts forged or misdirected tokens only: a missing
// token is every MCP client's first request, an expired one how it learns to
// refresh, and unavailable keys are the server's fault.
func TestInvalidTokenReasonsExcludeNormalClientBehaviour(t *testing.T) {
	for _, r := range []string{auth.ReasonMissingToken, auth.ReasonExpired, auth.ReasonKeysUnavailable, auth.ReasonGatewayMissing, ""} {
		assert.False(t, auth.IsInvalidTokenReason(r), r)
	}
	for _, r := range []string{auth.ReasonMalformedToken, auth.ReasonDisallowedAlg, auth.ReasonUnknownKey, auth.ReasonBadSignature,
		auth.ReasonNotYetValid, auth.ReasonWrongIssuer, auth.ReasonWrongAudience, auth.ReasonInvalidClaims, auth.ReasonGatewayClaims} {
		assert.True(t, auth.IsInvalidTokenReason(r), r)
	}
}
