package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// A JWKS is fetched again after its Cache-Control max-age (or Expires),
	// bounded by these; without either, after jwksMinInterval. A refresh
	// that fails keeps the keys and is tried again after jwksMinInterval.
	jwksMinInterval = 5 * time.Minute
	jwksMaxInterval = time.Hour
	// maxJWKSBytes bounds a JWKS document; real ones are a few kilobytes.
	maxJWKSBytes = 1 << 20
	// maxJWKSRedirects bounds the redirects the default client follows.
	maxJWKSRedirects = 5
)

// publicKey is one member of a fetched JWKS, read once at fetch time so
// that a request only looks it up.
type publicKey struct {
	kid, kty, use, alg string
	// key is the Go public key (*rsa.PublicKey or *ecdsa.PublicKey); nil
	// when the member could not be read, and unreadable says why.
	key        any
	unreadable error
}

// keySet is a fetched JWKS, when it was fetched and when it is due to be
// fetched again (wall clock), and the sequence number of the fetch that
// brought it (fetches are numbered as they start).
type keySet struct {
	keys    []publicKey
	fetched time.Time
	due     time.Time
	seq     uint64
}

// dueAt reports whether the set is to be fetched again at now: after its
// due time, or when the wall clock reads earlier than its fetch (stepped
// back), which would otherwise keep it fresh for as long as the step.
func (s *keySet) dueAt(now time.Time) bool {
	return !now.Before(s.due) || now.Before(s.fetched)
}

// withID returns the members whose kid is kid, in set order.
func (s *keySet) withID(kid string) []publicKey {
	var keys []publicKey
	for _, k := range s.keys {
		if k.kid == kid {
			keys = append(keys, k)
		}
	}
	return keys
}

// hasSigningKeyType: a readable member of type kty whose use, if stated,
// is signing.
func (s *keySet) hasSigningKeyType(kty string) bool {
	for _, k := range s.keys {
		if k.key != nil && k.kty == kty && (k.use == "" || k.use == "sig") {
			return true
		}
	}
	return false
}

// readable reports whether any of keys could be read.
func readable(keys []publicKey) bool {
	for _, k := range keys {
		if k.key != nil {
			return true
		}
	}
	return false
}

// parseJWKS reads a JWKS document. Members of a type not understood,
// missing required members or out of range are kept as unreadable rather
// than refusing the whole set (RFC 7517 §5: such keys are to be ignored):
// an issuer publishing a key of a newer type must not stop verification
// with the keys this verifier does read.
func parseJWKS(raw []byte) ([]publicKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Keys == nil {
		return nil, errors.New(`parse JWKS: not a JSON Web Key Set ({"keys": [...]})`)
	}
	keys := make([]publicKey, 0, len(doc.Keys))
	for _, member := range doc.Keys {
		keys = append(keys, readPublicKey(member))
	}
	return keys, nil
}

// requireReadable refuses a key set the verifier could verify nothing
// with: empty, or no member readable. As an issuer's answer it is taken
// for a broken one (a bad deploy of its key set), not for the withdrawal
// of every key: at start the start fails, on a refresh the keys at hand
// stay in use.
func requireReadable(keys []publicKey) error {
	switch {
	case len(keys) == 0:
		return errors.New("the JWKS has no keys")
	case !readable(keys):
		return fmt.Errorf("none of the JWKS's %d keys can be read: %w", len(keys), keys[0].unreadable)
	}
	return nil
}

// jwkMember is the part of a JWK (RFC 7517, 7518 §6) a verifier reads.
type jwkMember struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	// RSA
	N string `json:"n"`
	E string `json:"e"`
	// EC
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// readPublicKey reads one JWKS member; its kid, kty, use and alg are kept
// even when the key itself cannot be read, so a refusal can say why.
func readPublicKey(member json.RawMessage) publicKey {
	var m jwkMember
	if err := json.Unmarshal(member, &m); err != nil {
		return publicKey{unreadable: fmt.Errorf("not a JWK: %w", err)}
	}
	k := publicKey{kid: m.Kid, kty: m.Kty, use: m.Use, alg: m.Alg}
	switch m.Kty {
	case "RSA":
		k.key, k.unreadable = rsaPublicKey(m)
	case "EC":
		k.key, k.unreadable = ecPublicKey(m)
	default:
		k.unreadable = fmt.Errorf("key type %q is not one this verifier reads (RSA, EC)", m.Kty)
	}
	if k.unreadable != nil {
		k.key = nil
	}
	return k
}

// rsaPublicKey reads n and e (RFC 7518 §6.3.1). Its length is judged
// where it is used (publicKeyFor), so that a short key is refused as such.
func rsaPublicKey(m jwkMember) (any, error) {
	n, err := base64.RawURLEncoding.DecodeString(m.N)
	if err != nil || len(n) == 0 {
		return nil, errors.New("RSA key: n is not a base64url integer")
	}
	e, err := base64.RawURLEncoding.DecodeString(m.E)
	if err != nil || len(e) == 0 || len(e) > 4 {
		return nil, errors.New("RSA key: e is not a base64url integer of at most 4 bytes")
	}
	var exponent int64
	for _, b := range e {
		exponent = exponent<<8 | int64(b)
	}
	// What crypto/rsa verifies with: odd, at least 3, within 31 bits.
	if exponent < 3 || exponent%2 == 0 || exponent > math.MaxInt32 {
		return nil, fmt.Errorf("RSA key: exponent %d is not a valid public exponent", exponent)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exponent)}, nil
}

// ecCurve is a curve of RFC 7518 §6.2.1.1 and its coordinates' size.
func ecCurve(crv string) (elliptic.Curve, int, bool) {
	switch crv {
	case "P-256":
		return elliptic.P256(), 32, true
	case "P-384":
		return elliptic.P384(), 48, true
	case "P-521":
		return elliptic.P521(), 66, true
	}
	return nil, 0, false
}

// ecPublicKey reads crv, x and y (RFC 7518 §6.2.1); a point off its curve
// is no key at all.
func ecPublicKey(m jwkMember) (any, error) {
	curve, size, ok := ecCurve(m.Crv)
	if !ok {
		return nil, fmt.Errorf("EC key: curve %q is not P-256, P-384 or P-521", m.Crv)
	}
	x, errX := base64.RawURLEncoding.DecodeString(m.X)
	y, errY := base64.RawURLEncoding.DecodeString(m.Y)
	if errX != nil || errY != nil || len(x) != size || len(y) != size {
		return nil, fmt.Errorf("EC key: x and y must be %d-byte base64url values", size)
	}
	point := append(append([]byte{4}, x...), y...) // SEC 1 uncompressed form
	key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("EC key: %w", err)
	}
	return key, nil
}

// fetchJWKS GETs the JWKS document and says how long it may be kept.
func fetchJWKS(ctx context.Context, client *http.Client, url string, now time.Time) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("build JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err // names the URL already
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("JWKS answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, 0, fmt.Errorf("JWKS is larger than %d bytes", maxJWKSBytes)
	}
	return body, keepFor(resp.Header, now), nil
}

// keepFor is how long a JWKS answer may be used before it is fetched
// again: its Cache-Control max-age, else its Expires, bounded by
// [jwksMinInterval, jwksMaxInterval]; jwksMinInterval without either.
func keepFor(h http.Header, now time.Time) time.Duration {
	d, ok := maxAge(h.Get("Cache-Control"))
	if !ok {
		if exp, err := http.ParseTime(h.Get("Expires")); err == nil {
			d, ok = exp.Sub(now), true
		}
	}
	if !ok {
		return jwksMinInterval
	}
	return min(max(d, jwksMinInterval), jwksMaxInterval)
}

// maxAge reads the max-age directive of a Cache-Control value.
func maxAge(cacheControl string) (time.Duration, bool) {
	for directive := range strings.SplitSeq(cacheControl, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(directive), "=")
		if !strings.EqualFold(name, "max-age") {
			continue
		}
		secs, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64)
		if err != nil || secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(jwksMaxInterval/time.Second))) * time.Second, true
	}
	return 0, false
}

// defaultJWKSClient is the client used without VerifierConfig.HTTPClient.
func defaultJWKSClient() *http.Client {
	return &http.Client{Timeout: refreshTimeout, CheckRedirect: sameOriginRedirects}
}

// withSameOriginRedirects is client following redirects only within the
// JWKS URL's origin, so that a redirect cannot hand the choice of keys to
// another host; a client with a redirect policy of its own keeps it. The
// caller's client is copied, not changed.
func withSameOriginRedirects(client *http.Client) *http.Client {
	if client.CheckRedirect != nil {
		return client
	}
	c := *client
	c.CheckRedirect = sameOriginRedirects
	return &c
}

func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= maxJWKSRedirects {
		return fmt.Errorf("stopped after %d redirects", maxJWKSRedirects)
	}
	if from := via[0].URL; req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
		return fmt.Errorf("redirect to another origin (%s://%s) refused", req.URL.Scheme, req.URL.Host)
	}
	return nil
}
