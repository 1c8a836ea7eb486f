// Package issuer is a local token issuer for the devstack and for tests: it
// holds an RS256 and an ES256 signing key in memory, publishes their public
// halves as a JWKS, and mints access tokens. It has no token endpoint and no
// client authentication; it must never face real traffic.
//
// It also mints deliberately bad tokens (alg none, HS256, expired, wrong
// issuer or audience, foreign kid) so the verifier's refusals can be tested.
package issuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Paths served by [Issuer.Handler], relative to the issuer URL.
const (
	JWKSPath               = "/.well-known/jwks.json"
	OpenIDConfigPath       = "/.well-known/openid-configuration"
	AuthServerMetadataPath = "/.well-known/oauth-authorization-server"
)

// Algorithms the issuer signs with.
const (
	RS256 = "RS256"
	ES256 = "ES256"
)

// signingKey is one private key and its published identity.
type signingKey struct {
	alg     string
	kid     string
	private crypto.Signer
	public  jwk.Key
}

// Issuer mints tokens for one issuer URL. Safe for concurrent use.
type Issuer struct {
	url string

	mu        sync.RWMutex
	current   map[string]*signingKey // by algorithm
	published []jwk.Key              // every public key ever current, oldest first
}

// New creates an issuer for issuerURL (the token "iss"; its JWKS is expected
// at issuerURL + JWKSPath) with fresh RSA-2048 and P-256 keys.
func New(issuerURL string) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("issuer: URL %q is not an absolute http(s) URL", issuerURL)
	}
	i := &Issuer{url: issuerURL, current: map[string]*signingKey{}}
	if err := i.Rotate(); err != nil {
		return nil, err
	}
	return i, nil
}

// URL returns the issuer identifier (the "iss" of minted tokens).
func (i *Issuer) URL() string { return i.url }

// JWKSURL returns where [Issuer.Handler] serves the public keys.
func (i *Issuer) JWKSURL() string { return strings.TrimSuffix(i.url, "/") + JWKSPath }

// KeyID returns the kid of the current key for alg ("RS256" or "ES256"),
// or "" for any other algorithm.
func (i *Issuer) KeyID(alg string) string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	if k, ok := i.current[alg]; ok {
		return k.kid
	}
	return ""
}

// Rotate generates new RS256 and ES256 keys with new kids and makes them
// current. Earlier public keys stay in the JWKS, so tokens minted before the
// rotation still verify.
func (i *Issuer) Rotate() error {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("issuer: generate RSA key: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("issuer: generate EC key: %w", err)
	}
	rk, err := newSigningKey(RS256, rsaKey, jwa.RS256())
	if err != nil {
		return err
	}
	ek, err := newSigningKey(ES256, ecKey, jwa.ES256())
	if err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.current[RS256], i.current[ES256] = rk, ek
	i.published = append(i.published, rk.public, ek.public)
	return nil
}

// newSigningKey builds the public JWK (kid = RFC 7638 thumbprint, alg, use).
func newSigningKey(alg string, priv crypto.Signer, jalg jwa.SignatureAlgorithm) (*signingKey, error) {
	pub, err := jwk.Import(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("issuer: import %s public key: %w", alg, err)
	}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("issuer: thumbprint %s key: %w", alg, err)
	}
	kid := b64(tp)
	for name, v := range map[string]any{jwk.KeyIDKey: kid, jwk.AlgorithmKey: jalg, jwk.KeyUsageKey: "sig"} {
		if err := pub.Set(name, v); err != nil {
			return nil, fmt.Errorf("issuer: set %s on %s key: %w", name, alg, err)
		}
	}
	return &signingKey{alg: alg, kid: kid, private: priv, public: pub}, nil
}

// PublicJWKS returns the published public keys.
func (i *Issuer) PublicJWKS() (jwk.Set, error) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	set := jwk.NewSet()
	for _, k := range i.published {
		if err := set.AddKey(k); err != nil {
			return nil, fmt.Errorf("issuer: build JWKS: %w", err)
		}
	}
	return set, nil
}

// RSAPublicKeyPEM returns the current RSA public key as PKIX PEM: the bytes an
// attacker would use as an HMAC secret in the RS256/HS256 confusion attack.
func (i *Issuer) RSAPublicKeyPEM() ([]byte, error) {
	i.mu.RLock()
	k := i.current[RS256]
	i.mu.RUnlock()
	der, err := x509.MarshalPKIXPublicKey(k.private.Public())
	if err != nil {
		return nil, fmt.Errorf("issuer: marshal RSA public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func (i *Issuer) key(alg string) (*signingKey, error) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	k, ok := i.current[alg]
	if !ok {
		return nil, fmt.Errorf("issuer: no signing key for %q (have RS256, ES256)", alg)
	}
	return k, nil
}
