package issuer_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

const issuerURL = "https://issuer.example.test"

func get(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, path, nil))
	var doc map[string]any
	if rr.Code == http.StatusOK {
		require.NoError(t, json.Unmarshal(rr.Body.Bytes(), &doc))
	}
	return rr.Code, doc
}

func decodeSegment(t *testing.T, token string, i int) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[i])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestJWKSPublishesOnlyPublicSigningKeys(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	code, doc := get(t, iss.Handler(), issuer.JWKSPath)
	require.Equal(t, http.StatusOK, code)

	keys := doc["keys"].([]any)
	require.Len(t, keys, 2)
	byKid := map[string]map[string]any{}
	for _, k := range keys {
		key := k.(map[string]any)
		byKid[key["kid"].(string)] = key
		assert.Equal(t, "sig", key["use"])
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi"} {
			assert.NotContains(t, key, private, "private parameter %q published", private)
		}
	}
	assert.Equal(t, "RSA", byKid[iss.KeyID(issuer.RS256)]["kty"])
	assert.Equal(t, "RS256", byKid[iss.KeyID(issuer.RS256)]["alg"])
	assert.Equal(t, "EC", byKid[iss.KeyID(issuer.ES256)]["kty"])
	assert.Equal(t, "P-256", byKid[iss.KeyID(issuer.ES256)]["crv"])
}

func TestMetadataDocumentsPointAtJWKS(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	assert.Equal(t, issuerURL+"/.well-known/jwks.json", iss.JWKSURL())
	for _, p := range []string{issuer.OpenIDConfigPath, issuer.AuthServerMetadataPath} {
		code, doc := get(t, iss.Handler(), p)
		require.Equal(t, http.StatusOK, code, p)
		assert.Equal(t, issuerURL, doc["issuer"])
		assert.Equal(t, iss.JWKSURL(), doc["jwks_uri"])
	}
	code, _ := get(t, iss.Handler(), "/token")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestMintWritesRequestedClaims(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	nbf := time.Now().Add(time.Minute).Truncate(time.Second)
	tok, err := iss.Mint(issuer.Claims{
		Subject: "u1", ClientID: "c1", Audience: "https://mcp.example.test/mcp", MerchantID: "m1",
		Roles: []string{"a"}, TTL: time.Hour, NotBefore: nbf, Extra: map[string]any{"scope": "mcp", "jti": nil},
	}, issuer.WithAlgorithm(issuer.ES256))
	require.NoError(t, err)

	hdr := decodeSegment(t, tok, 0)
	assert.Equal(t, "ES256", hdr["alg"])
	assert.Equal(t, iss.KeyID(issuer.ES256), hdr["kid"])
	assert.Equal(t, "at+jwt", hdr["typ"])

	c := decodeSegment(t, tok, 1)
	assert.Equal(t, issuerURL, c["iss"])
	assert.Equal(t, "u1", c["sub"])
	assert.Equal(t, "c1", c["client_id"])
	assert.Equal(t, "https://mcp.example.test/mcp", c["aud"])
	assert.Equal(t, "m1", c["merchant_id"])
	assert.Equal(t, []any{"a"}, c["roles"])
	assert.Equal(t, "mcp", c["scope"])
	assert.NotContains(t, c, "jti", "a nil Extra value removes the claim")
	assert.Equal(t, float64(nbf.Unix()), c["nbf"])
	assert.Equal(t, float64(3600), c["exp"].(float64)-c["iat"].(float64))
}

func TestMintOptionsOverrideIssuerAudienceAndLifetime(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	tok, err := iss.Mint(issuer.Claims{Subject: "u", Audience: "a"},
		issuer.Expired(), issuer.WithIssuer("https://other.test"), issuer.WithAudience("b"), issuer.WithKeyID("k9"))
	require.NoError(t, err)
	c := decodeSegment(t, tok, 1)
	assert.Equal(t, "https://other.test", c["iss"])
	assert.Equal(t, "b", c["aud"])
	assert.Less(t, c["exp"].(float64), float64(time.Now().Add(-30*time.Minute).Unix()))
	assert.Equal(t, "k9", decodeSegment(t, tok, 0)["kid"])

	_, err = iss.Mint(issuer.Claims{}, issuer.WithAlgorithm("HS256"))
	assert.Error(t, err, "Mint signs only with its own asymmetric keys")
}

func TestNegativeTokensCarryTheirAlgorithm(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	none := iss.MintUnsigned(issuer.Claims{Subject: "u"})
	assert.True(t, strings.HasSuffix(none, "."), "empty signature")
	assert.Equal(t, "none", decodeSegment(t, none, 0)["alg"])
	assert.Equal(t, iss.KeyID(issuer.RS256), decodeSegment(t, none, 0)["kid"])

	pem, err := iss.RSAPublicKeyPEM()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(pem), "-----BEGIN PUBLIC KEY-----"))
	hs, err := iss.MintHS256(issuer.Claims{Subject: "u"}, pem)
	require.NoError(t, err)
	assert.Equal(t, "HS256", decodeSegment(t, hs, 0)["alg"])
}

func TestRotateKeepsEarlierKeysPublished(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	oldKid := iss.KeyID(issuer.RS256)
	require.NoError(t, iss.Rotate())
	assert.NotEqual(t, oldKid, iss.KeyID(issuer.RS256))

	set := iss.PublicJWKS()
	assert.Len(t, set.Keys, 4)
	_, ok := set.Key(oldKid)
	assert.True(t, ok)
}

func TestNewRefusesRelativeURL(t *testing.T) {
	_, err := issuer.New("/issuer")
	assert.Error(t, err)
}

func TestHandlerServesOverHTTP(t *testing.T) {
	iss, err := issuer.New(issuerURL)
	require.NoError(t, err)
	srv := httptest.NewServer(iss.Handler())
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + issuer.JWKSPath)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
	assert.Contains(t, string(body), iss.KeyID(issuer.ES256))
}
