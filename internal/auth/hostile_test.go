package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/testsync"
)

// refreshTimeoutForTests is the verifier's bound on one refresh: past it by
// the wall clock, an unfinished refresh is stale.
const refreshTimeoutForTests = 10 * time.Second

// rawSigner signs header.payload given as JSON text, so a test can send
// what no JWT library would build: headers and claims a real issuer key
// signed but that must still be refused.
type rawSigner struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newRawSigner(t *testing.T) rawSigner {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return rawSigner{rsa: r, ec: e}
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (s rawSigner) rsaJWK(kid string, extra map[string]any) map[string]any {
	m := map[string]any{"kty": "RSA", "kid": kid, "n": b64url(s.rsa.N.Bytes()), "e": b64url(big.NewInt(int64(s.rsa.E)).Bytes())}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// sign signs with alg ("RS256", "PS256" or "ES256").
func (s rawSigner) sign(t *testing.T, header, payload, alg string) string {
	t.Helper()
	input := b64url([]byte(header)) + "." + b64url([]byte(payload))
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.rsa, crypto.SHA256, digest[:])
	case "PS256":
		sig, err = rsa.SignPSS(rand.Reader, s.rsa, crypto.SHA256, digest[:], nil)
	case "ES256":
		var r, ss *big.Int
		r, ss, err = ecdsa.Sign(rand.Reader, s.ec, digest[:])
		if err == nil {
			sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
		}
	}
	require.NoError(t, err)
	return input + "." + b64url(sig)
}

const hostileIssuer = "https://issuer.hostile.test"

// claimsJSON is a valid claim set with members added or replaced by
// members (raw JSON, e.g. `"nbf":1e19`); a name mapped to "" is dropped.
func claimsJSON(members map[string]string) string {
	now := time.Now().Unix()
	all := map[string]string{
		"iss": fmt.Sprintf("%q", hostileIssuer), "aud": fmt.Sprintf("%q", resource),
		"sub": `"u"`, "client_id": `"c"`, "exp": fmt.Sprint(now + 600), "iat": fmt.Sprint(now),
	}
	for k, v := range members {
		all[k] = v
	}
	var parts []string
	for k, v := range all {
		if v != "" {
			parts = append(parts, fmt.Sprintf("%q:%s", k, v))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func hostileVerifier(t *testing.T, keys []map[string]any, algs ...string) *auth.Verifier {
	t.Helper()
	url := serveKeys(t, func() []map[string]any { return keys })
	v, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: url, Issuer: hostileIssuer, Audience: resource, Algorithms: algs})
	require.NoError(t, err)
	return v
}

// Tokens the issuer's own key really signed, whose header or claims must
// still be refused, each for its reason. (A token without a valid
// signature is refused before any of this.)
func TestSignedTokensWithHostileHeadersOrClaimsAreRefused(t *testing.T) {
	s := newRawSigner(t)
	v := hostileVerifier(t, []map[string]any{s.rsaJWK("r", map[string]any{"alg": "RS256"}), s.rsaJWK("any", nil)}, "RS256", "PS256")
	rs256 := `{"alg":"RS256","kid":"any"}`
	for _, tc := range []struct {
		name, header, payload, alg, reason string
	}{
		// The alg the verifier pins and the alg the signature is checked
		// with must be the same member: JSON object member names are case
		// sensitive.
		{"alg and Alg disagreeing", `{"alg":"PS256","kid":"r","Alg":"RS256"}`, claimsJSON(nil), "PS256", auth.ReasonDisallowedAlg},
		{"ALG instead of alg", `{"ALG":"RS256","kid":"any"}`, claimsJSON(nil), "RS256", auth.ReasonDisallowedAlg},
		{"KID instead of kid", `{"alg":"RS256","KID":"any"}`, claimsJSON(nil), "RS256", auth.ReasonUnknownKey},
		// RFC 7515 §4.1.11: an extension named in crit that is not
		// understood makes the JWS invalid; none is understood here.
		{"crit naming an extension", `{"alg":"RS256","kid":"any","crit":["urn:x"],"urn:x":1}`, claimsJSON(nil), "RS256", auth.ReasonMalformedToken},
		{"unencoded payload (b64 false)", `{"alg":"RS256","kid":"any","b64":false,"crit":["b64"]}`, claimsJSON(nil), "RS256", auth.ReasonMalformedToken},
		{"kid not a string", `{"alg":"RS256","kid":7}`, claimsJSON(nil), "RS256", auth.ReasonMalformedToken},
		// NumericDates a time cannot hold are no dates: converted, they
		// wrapped into the past and passed.
		{"nbf 1e300", rs256, claimsJSON(map[string]string{"nbf": "1e300"}), "RS256", auth.ReasonInvalidClaims},
		{"nbf 1e19", rs256, claimsJSON(map[string]string{"nbf": "1e19"}), "RS256", auth.ReasonInvalidClaims},
		{"nbf -1e300", rs256, claimsJSON(map[string]string{"nbf": "-1e300"}), "RS256", auth.ReasonInvalidClaims},
		{"iat 1e19", rs256, claimsJSON(map[string]string{"iat": "1e19"}), "RS256", auth.ReasonInvalidClaims},
		{"exp 1e19", rs256, claimsJSON(map[string]string{"exp": "1e19"}), "RS256", auth.ReasonInvalidClaims},
		{"exp as a string", rs256, claimsJSON(map[string]string{"exp": `"9999999999"`}), "RS256", auth.ReasonInvalidClaims},
		{"exp null", rs256, claimsJSON(map[string]string{"exp": "null"}), "RS256", auth.ReasonInvalidClaims},
		{"nbf as a string", rs256, claimsJSON(map[string]string{"nbf": `"1"`}), "RS256", auth.ReasonInvalidClaims},
		{"exp 0", rs256, claimsJSON(map[string]string{"exp": "0"}), "RS256", auth.ReasonInvalidClaims},
		{"no iss", rs256, claimsJSON(map[string]string{"iss": ""}), "RS256", auth.ReasonWrongIssuer},
		{"iss not a string", rs256, claimsJSON(map[string]string{"iss": "5"}), "RS256", auth.ReasonWrongIssuer},
		{"aud a number", rs256, claimsJSON(map[string]string{"aud": "5"}), "RS256", auth.ReasonWrongAudience},
		{"aud null", rs256, claimsJSON(map[string]string{"aud": "null"}), "RS256", auth.ReasonWrongAudience},
		{"aud array holding a number", rs256, claimsJSON(map[string]string{"aud": fmt.Sprintf("[1,%q]", resource)}), "RS256", auth.ReasonWrongAudience},
		{"payload null", rs256, "null", "RS256", auth.ReasonInvalidClaims},
		{"payload an array", rs256, "[]", "RS256", auth.ReasonMalformedToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), s.sign(t, tc.header, tc.payload, tc.alg))
			var te *auth.TokenError
			require.ErrorAs(t, err, &te, "accepted")
			assert.Equal(t, tc.reason, te.Reason, "detail: %v", err)
		})
	}
	for _, members := range []map[string]string{
		{"aud": fmt.Sprintf("[%q,%q]", "https://other.example", resource)},
		{"nbf": "0"},
		{"nbf": fmt.Sprint(time.Now().Unix() - 60)},
	} {
		_, err := v.Verify(context.Background(), s.sign(t, rs256, claimsJSON(members), "RS256"))
		assert.NoError(t, err, "%v", members)
	}
}

// A refused alg is the caller's text, refused before any signature
// check: a refusal names it, but not at any length.
func TestARefusedAlgIsNotEchoedAtFullLength(t *testing.T) {
	s := newRawSigner(t)
	v := hostileVerifier(t, []map[string]any{s.rsaJWK("any", nil)})
	_, err := v.Verify(context.Background(), s.sign(t, `{"alg":"`+strings.Repeat("A", 10_000)+`","kid":"any"}`, claimsJSON(nil), "RS256"))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400)
}

// sequencedJWKS answers the n-th fetch (from 1) with answer(n), which may
// block; it counts the fetches.
func sequencedJWKS(t *testing.T, answer func(n int64) []byte) (url string, fetches *atomic.Int64) {
	t.Helper()
	fetches = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer(fetches.Add(1)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + issuer.JWKSPath, fetches
}

func keysDocument(t *testing.T, keys ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	require.NoError(t, err)
	return b
}

func signedWithKid(t *testing.T, s rawSigner, kid string) string {
	return s.sign(t, fmt.Sprintf(`{"alg":"RS256","kid":%q}`, kid), claimsJSON(map[string]string{"exp": fmt.Sprint(time.Now().Add(3 * time.Hour).Unix())}), "RS256")
}

// A refresh can outlive the one started after it (frozen with its Lambda
// instance, or overtaken after a clock step): when it lands last, its
// older answer must not replace the newer keys, or a rotated-in key just
// fetched is refused again, and a withdrawn one trusted again, for up to
// an hour.
func TestARefreshLandingAfterANewerOneDoesNotReplaceItsKeys(t *testing.T) {
	s := newRawSigner(t)
	before := keysDocument(t, s.rsaJWK("old", nil))
	after := keysDocument(t, s.rsaJWK("old", nil), s.rsaJWK("new", nil))
	release, held := make(chan struct{}), make(chan struct{})
	url, _ := sequencedJWKS(t, func(n int64) []byte {
		switch n {
		case 1:
			return before
		case 2: // the scheduled refresh, held past its successor
			close(held)
			<-release
			return before
		default:
			return after
		}
	})
	clock := testclock.New(time.Now())
	v := verifierAt(t, url, hostileIssuer, clock)

	clock.Advance(6 * time.Minute) // due: this request starts the scheduled refresh
	_, err := v.Verify(context.Background(), signedWithKid(t, s, "old"))
	require.NoError(t, err)
	<-held
	clock.Advance(refreshTimeoutForTests + time.Second) // frozen, then thawed
	_, err = v.Verify(context.Background(), signedWithKid(t, s, "new"))
	require.NoError(t, err, "the forced refresh fetched the rotated-in key")

	close(release)
	time.Sleep(200 * time.Millisecond) // the held refresh lands
	_, err = v.Verify(context.Background(), signedWithKid(t, s, "new"))
	assert.NoError(t, err, "the older answer, landing last, did not replace the newer keys")
}

// An issuer answering {"keys":[]} (a bad deploy of its key set) is a failed
// refresh: the keys at hand stay in use. At start it is a failed start.
func TestAnEmptyKeySetIsAFailedFetchNotTheEndOfEveryKey(t *testing.T) {
	s := newRawSigner(t)
	url, fetches := sequencedJWKS(t, func(n int64) []byte {
		if n == 1 {
			return keysDocument(t, s.rsaJWK("k", nil))
		}
		return []byte(`{"keys":[]}`)
	})
	clock := testclock.New(time.Now())
	v := verifierAt(t, url, hostileIssuer, clock)
	clock.Advance(6 * time.Minute)
	_, err := v.Verify(context.Background(), signedWithKid(t, s, "k"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fetches.Load() == 2 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	_, err = v.Verify(context.Background(), signedWithKid(t, s, "k"))
	assert.NoError(t, err, "the keys fetched before stay in use")

	empty, _ := sequencedJWKS(t, func(int64) []byte { return []byte(`{"keys":[]}`) })
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: empty, Issuer: hostileIssuer, Audience: resource})
	assert.ErrorContains(t, err, "no key")
}

// A wall clock stepped back (an NTP correction) must not hold the JWKS
// "not due" until it catches up, nor hold forced refreshes off as rate
// limited: a withdrawn key would stay trusted and a rotated-in one refused.
func TestAWallClockSteppedBackDoesNotHoldRefreshesOff(t *testing.T) {
	s := newRawSigner(t)
	url, fetches := sequencedJWKS(t, func(n int64) []byte {
		if n <= 2 {
			return keysDocument(t, s.rsaJWK("old", nil))
		}
		return keysDocument(t, s.rsaJWK("new", nil)) // "old" withdrawn
	})
	clock := testclock.New(time.Now())
	v := verifierAt(t, url, hostileIssuer, clock, func(c *auth.VerifierConfig) { c.Skew = 3 * time.Hour })
	_, err := v.Verify(context.Background(), signedWithKid(t, s, "unknown"))
	require.Error(t, err) // one forced refresh
	require.EqualValues(t, 2, fetches.Load())

	clock.Advance(-2 * time.Hour)
	_, err = v.Verify(context.Background(), signedWithKid(t, s, "new"))
	assert.NoError(t, err, "the rotated-in key is fetched at once")
	require.Eventually(t, func() bool {
		_, err := v.Verify(context.Background(), signedWithKid(t, s, "old"))
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "the withdrawn key is refused")
}

// The rule that a redirect may not hand the choice of keys to another host
// holds for a client of the caller's too (the functions pass a traced one),
// unless that client brings its own redirect policy.
func TestAClientOfTheCallersAlsoFollowsRedirectsOnlyWithinTheJWKSOrigin(t *testing.T) {
	s := newRawSigner(t)
	url, _ := sequencedJWKS(t, func(int64) []byte { return keysDocument(t, s.rsaJWK("k", nil)) })
	elsewhere := httptest.NewServer(http.RedirectHandler(url, http.StatusFound))
	t.Cleanup(elsewhere.Close)
	client := &http.Client{Timeout: 5 * time.Second}
	_, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: elsewhere.URL + "/jwks", Issuer: hostileIssuer, Audience: resource, HTTPClient: client})
	require.ErrorContains(t, err, "another origin")
	assert.Nil(t, client.CheckRedirect, "the caller's client is left as it was")

	own := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: elsewhere.URL + "/jwks", Issuer: hostileIssuer, Audience: resource, HTTPClient: own})
	assert.NoError(t, err, "a client with its own redirect policy keeps it")
}

// A clock stepped back while the issuer is down: the verifier asks again
// at the pace of a failed refresh (every five minutes), not on every
// request, and says so once, not once per request.
func TestAWallClockSteppedBackWhileTheIssuerIsDownDoesNotTurnEveryRequestIntoARefresh(t *testing.T) {
	s := newRawSigner(t)
	var down atomic.Bool
	url, fetches := sequencedJWKS(t, func(int64) []byte {
		if down.Load() {
			return []byte(`<html>down</html>`)
		}
		return keysDocument(t, s.rsaJWK("k", nil))
	})
	clock := testclock.New(time.Now())
	var logs testsync.Buffer
	v := verifierAt(t, url, hostileIssuer, clock, func(c *auth.VerifierConfig) {
		c.Skew = 3 * time.Hour
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	down.Store(true)
	clock.Advance(-time.Hour)
	token := signedWithKid(t, s, "k")
	for range 50 {
		_, err := v.Verify(context.Background(), token)
		require.NoError(t, err, "the keys at hand stay in use")
		clock.Advance(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	assert.LessOrEqual(t, fetches.Load(), int64(3), "fetches in 50 s of requests")
	assert.LessOrEqual(t, strings.Count(logs.String(), "JWKS refresh failed"), 2)
}
