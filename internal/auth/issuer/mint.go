package issuer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultTTL is the lifetime of a minted token when Claims.TTL is zero.
const DefaultTTL = 5 * time.Minute

// Claims describes a token to mint. Roles go out as "roles" (array) and
// MerchantID as "merchant_id", the verifier's default claim names. Empty
// strings are omitted. Extra is applied last and overrides anything; a nil
// value removes the claim (e.g. Extra{"exp": nil} mints a token without exp).
type Claims struct {
	Subject    string
	ClientID   string
	Audience   string
	MerchantID string
	Roles      []string
	TTL        time.Duration
	NotBefore  time.Time
	Extra      map[string]any
}

type mintConfig struct {
	alg      string
	expired  bool
	issuer   *string
	audience *string
	kid      *string
}

// MintOption adjusts one Mint call, mostly to build bad tokens for tests.
type MintOption func(*mintConfig)

// WithAlgorithm signs with "RS256" (default) or "ES256".
func WithAlgorithm(alg string) MintOption { return func(c *mintConfig) { c.alg = alg } }

// Expired mints a token that expired an hour ago (beyond any sane skew).
func Expired() MintOption { return func(c *mintConfig) { c.expired = true } }

// WithIssuer sets "iss" to iss instead of the issuer's own URL.
func WithIssuer(iss string) MintOption { return func(c *mintConfig) { c.issuer = &iss } }

// WithAudience sets "aud" to aud instead of Claims.Audience.
func WithAudience(aud string) MintOption { return func(c *mintConfig) { c.audience = &aud } }

// WithKeyID puts kid in the header instead of the signing key's own kid
// ("" omits it): for tokens that name a key they were not signed with.
func WithKeyID(kid string) MintOption { return func(c *mintConfig) { c.kid = &kid } }

// Mint signs an access token (typ "at+jwt") with the current key for the
// chosen algorithm.
func (i *Issuer) Mint(c Claims, opts ...MintOption) (string, error) {
	cfg := mintConfig{alg: RS256}
	for _, o := range opts {
		o(&cfg)
	}
	k, err := i.key(cfg.alg)
	if err != nil {
		return "", err
	}
	token := jwt.NewWithClaims(k.method, jwt.MapClaims(i.claimSet(c, cfg)))
	token.Header["typ"] = "at+jwt"
	kid := k.kid
	if cfg.kid != nil {
		kid = *cfg.kid
	}
	if kid != "" {
		token.Header["kid"] = kid
	}
	signed, err := token.SignedString(k.private)
	if err != nil {
		return "", fmt.Errorf("issuer: sign %s: %w", cfg.alg, err)
	}
	return signed, nil
}

// MintUnsigned returns an "alg":"none" token (empty signature) whose header
// names the current RS256 kid, for negative tests. It panics if Extra cannot
// be encoded as JSON.
func (i *Issuer) MintUnsigned(c Claims) string {
	input, err := i.signingInput(c, "none")
	if err != nil {
		panic(err)
	}
	return input + "."
}

// MintHS256 returns a token HMAC-SHA256-signed with secret whose header names
// the current RS256 kid: with the RSA public key PEM as secret this is the
// algorithm-confusion forgery. For negative tests.
func (i *Issuer) MintHS256(c Claims, secret []byte) (string, error) {
	input, err := i.signingInput(c, "HS256")
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64(mac.Sum(nil)), nil
}

// signingInput hand-builds header.payload for algorithms a JWT library
// rightly refuses to produce from an RSA key.
func (i *Issuer) signingInput(c Claims, alg string) (string, error) {
	hdr, err := json.Marshal(map[string]string{"alg": alg, "typ": "at+jwt", "kid": i.KeyID(RS256)})
	if err != nil {
		return "", fmt.Errorf("issuer: encode header: %w", err)
	}
	payload, err := json.Marshal(i.claimSet(c, mintConfig{}))
	if err != nil {
		return "", fmt.Errorf("issuer: encode claims: %w", err)
	}
	return b64(hdr) + "." + b64(payload), nil
}

func (i *Issuer) claimSet(c Claims, cfg mintConfig) map[string]any {
	now := time.Now()
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	iat, exp := now, now.Add(ttl)
	if cfg.expired {
		iat, exp = now.Add(-2*time.Hour), now.Add(-time.Hour)
	}
	m := map[string]any{
		"iss": i.url,
		"iat": iat.Unix(),
		"exp": exp.Unix(),
		"jti": randomID(),
	}
	if cfg.issuer != nil {
		m["iss"] = *cfg.issuer
	}
	aud := c.Audience
	if cfg.audience != nil {
		aud = *cfg.audience
	}
	for name, v := range map[string]string{"sub": c.Subject, "client_id": c.ClientID, "aud": aud, "merchant_id": c.MerchantID} {
		if v != "" {
			m[name] = v
		}
	}
	if c.Roles != nil {
		m["roles"] = c.Roles
	}
	if !c.NotBefore.IsZero() {
		m["nbf"] = c.NotBefore.Unix()
	}
	maps.Copy(m, c.Extra)
	for name, v := range c.Extra {
		if v == nil {
			delete(m, name)
		}
	}
	return m
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b64(b)
}
