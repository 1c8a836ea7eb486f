package auth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultAlgorithmsAreNotSharedBetweenConfigs(t *testing.T) {
	base := VerifierConfig{JWKSURL: "https://issuer.example/jwks", Issuer: "https://issuer.example", Audience: "https://mcp.example"}
	first, err := base.withDefaults()
	require.NoError(t, err)
	require.Equal(t, []string{"RS256", "ES256"}, first.Algorithms)

	// A caller changing its own config must not change the next Verifier's.
	first.Algorithms[0] = "PS512"
	second, err := base.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, []string{"RS256", "ES256"}, second.Algorithms)
}

func TestOnlyAsymmetricAlgorithmsArePermitted(t *testing.T) {
	for _, name := range []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"} {
		assert.True(t, permittedAlgorithm(name), name)
	}
	for _, name := range []string{"", "none", "HS256", "HS384", "HS512", "EdDSA", "rs256", "RS1"} {
		assert.False(t, permittedAlgorithm(name), name)
	}
}
