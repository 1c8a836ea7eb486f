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
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
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

// JWK is a published public key (RFC 7517): RSA members n and e, EC
// members crv, x and y.
type JWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

// JWKS is a JSON Web Key Set, {"keys": [...]}.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// Key returns the set's first key with kid, and whether there is one.
func (s JWKS) Key(kid string) (JWK, bool) {
	for _, k := range s.Keys {
		if k.Kid == kid {
			return k, true
		}
	}
	return JWK{}, false
}

// signingKey is one private key and its published identity.
type signingKey struct {
	alg     string
	kid     string
	method  jwt.SigningMethod
	private crypto.Signer
	public  JWK
}

// Issuer mints tokens for one issuer URL. Safe for concurrent use.
type Issuer struct {
	url string

	mu        sync.RWMutex
	current   map[string]*signingKey // by algorithm
	published []JWK                  // every public key ever current, oldest first
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
	rk, err := newSigningKey(RS256, rsaKey, jwt.SigningMethodRS256)
	if err != nil {
		return err
	}
	ek, err := newSigningKey(ES256, ecKey, jwt.SigningMethodES256)
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
func newSigningKey(alg string, priv crypto.Signer, method jwt.SigningMethod) (*signingKey, error) {
	pub := JWK{Use: "sig", Alg: alg}
	// RFC 7638 §3.2: the required members, in lexicographic order, no
	// whitespace.
	var thumbprintInput []byte
	switch key := priv.Public().(type) {
	case *rsa.PublicKey:
		pub.Kty, pub.N, pub.E = "RSA", b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
		thumbprintInput = fmt.Appendf(nil, `{"e":%q,"kty":"RSA","n":%q}`, pub.E, pub.N)
	case *ecdsa.PublicKey:
		point, err := key.Bytes() // 0x04 || x || y
		if err != nil {
			return nil, fmt.Errorf("issuer: encode %s public key: %w", alg, err)
		}
		size := (len(point) - 1) / 2
		pub.Kty, pub.Crv = "EC", key.Curve.Params().Name
		pub.X, pub.Y = b64(point[1:1+size]), b64(point[1+size:])
		thumbprintInput = fmt.Appendf(nil, `{"crv":%q,"kty":"EC","x":%q,"y":%q}`, pub.Crv, pub.X, pub.Y)
	default:
		return nil, fmt.Errorf("issuer: no JWK form for a %T", key)
	}
	tp := sha256.Sum256(thumbprintInput)
	pub.Kid = b64(tp[:])
	return &signingKey{alg: alg, kid: pub.Kid, method: method, private: priv, public: pub}, nil
}

// PublicJWKS returns the published public keys.
func (i *Issuer) PublicJWKS() JWKS {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return JWKS{Keys: append([]JWK(nil), i.published...)}
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
