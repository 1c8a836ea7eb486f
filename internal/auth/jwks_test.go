package auth_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// jwksKeys is the issuer's public JWKS as JSON objects, to be edited.
func jwksKeys(t *testing.T, iss *issuer.Issuer) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(iss.PublicJWKS())
	require.NoError(t, err)
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	return doc.Keys
}

// serveKeys serves {"keys": keys()} at the issuer's JWKS path.
func serveKeys(t *testing.T, keys func() []map[string]any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys()})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + issuer.JWKSPath
}

// RFC 7517 §5: a JWK Set's keys of a type not understood, missing required
// members or out of range are to be ignored, not to make the set unusable:
// an issuer that adds a key of a newer type must not stop every verifier.
func TestKeysTheVerifierCannotUseArePassedOverNotFatal(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	url := serveKeys(t, func() []map[string]any {
		return append(jwksKeys(t, iss),
			map[string]any{"kty": "AKP", "kid": "post-quantum", "alg": "ML-DSA-65", "pub": "AAAA"},
			map[string]any{"kty": "RSA", "kid": "no-modulus", "e": "AQAB"},
			map[string]any{"kty": "EC", "kid": "off-curve", "crv": "P-256",
				"x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "y": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := auth.NewVerifier(ctx, auth.VerifierConfig{JWKSURL: url, Issuer: iss.URL(), Audience: resource})
	require.NoError(t, err)

	for _, alg := range []string{issuer.RS256, issuer.ES256} {
		tok, err := iss.Mint(goodClaims(), issuer.WithAlgorithm(alg))
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), tok)
		assert.NoError(t, err, alg)
	}
	// A token naming a key that was passed over is refused as unknown.
	tok, err := iss.Mint(goodClaims(), issuer.WithAlgorithm(issuer.ES256), issuer.WithKeyID("off-curve"))
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), tok)
	var te *auth.TokenError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, auth.ReasonUnknownKey, te.Reason)
}

// jwksServer serves an editable JWKS with a chosen Cache-Control, counts
// its fetches, and can be taken down or made to hold its answers.
type jwksServer struct {
	url     string
	fetches atomic.Int64

	mu           sync.Mutex
	keys         []map[string]any
	cacheControl string
	down         bool
	hold         chan struct{} // non-nil: answers wait until it is closed
}

func startJWKSServer(t *testing.T, keys []map[string]any, cacheControl string) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: keys, cacheControl: cacheControl}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		keys, cc, down, hold := s.keys, s.cacheControl, s.down, s.hold
		s.mu.Unlock()
		if hold != nil {
			<-hold
		}
		if down {
			http.Error(w, "issuer down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", cc)
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + issuer.JWKSPath
	return s
}

func (s *jwksServer) edit(f func(*jwksServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// withoutKid drops the members whose kid is kid.
func withoutKid(keys []map[string]any, kid string) []map[string]any {
	var kept []map[string]any
	for _, k := range keys {
		if k["kid"] != kid {
			kept = append(kept, k)
		}
	}
	return kept
}

// verifierAt is a verifier of the JWKS at url whose wall clock is clock.
func verifierAt(t *testing.T, url, issuerURL string, clock *testclock.Clock, mutate ...func(*auth.VerifierConfig)) *auth.Verifier {
	t.Helper()
	return startVerifier(t, auth.VerifierConfig{JWKSURL: url, Issuer: issuerURL, Audience: resource, Clock: clock.Now}, mutate...)
}

// longLived is goodClaims with a lifetime that outlasts the test clock's
// moves.
func longLived() issuer.Claims {
	c := goodClaims()
	c.TTL = 3 * time.Hour
	return c
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var te *auth.TokenError
	require.ErrorAs(t, err, &te)
	return te.Reason
}

// A key the issuer withdraws (rotated out, or compromised) stops verifying
// once the JWKS it came from is due again: after its Cache-Control
// max-age, and not before, so the issuer is asked once per max-age and
// not on every request.
func TestAKeyTheIssuerWithdrawsIsRefusedOnceTheJWKSIsDueAgain(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := startJWKSServer(t, jwksKeys(t, iss), "public, max-age=600")
	clock := testclock.New(time.Now())
	v := verifierAt(t, jwks.url, iss.URL(), clock)
	ecToken, err := iss.Mint(longLived(), issuer.WithAlgorithm(issuer.ES256))
	require.NoError(t, err)
	jwks.edit(func(s *jwksServer) { s.keys = withoutKid(s.keys, iss.KeyID(issuer.ES256)) })

	clock.Advance(9 * time.Minute)
	_, err = v.Verify(context.Background(), ecToken)
	require.NoError(t, err, "inside the max-age the keys fetched stand")
	assert.EqualValues(t, 1, jwks.fetches.Load(), "and the issuer is not asked")

	clock.Advance(time.Minute)
	// The request that finds the JWKS due is judged by the keys at hand
	// while the refresh runs; requests after it by the new keys.
	_, _ = v.Verify(context.Background(), ecToken)
	require.Eventually(t, func() bool {
		_, err := v.Verify(context.Background(), ecToken)
		return err != nil && reasonOf(t, err) == auth.ReasonUnknownKey
	}, 5*time.Second, 10*time.Millisecond, "the withdrawn key is refused")
	rsaToken, err := iss.Mint(longLived())
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), rsaToken)
	assert.NoError(t, err, "the key still published verifies")
}

// Cache-Control is honoured within bounds: an issuer asking for a minute
// is asked every five minutes at most, one asking for a day at least
// hourly; without Cache-Control or Expires, every five minutes.
func TestTheJWKSIsFetchedAgainAfterItsMaxAgeBoundedToFiveMinutesAndAnHour(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	rsaToken, err := iss.Mint(longLived())
	require.NoError(t, err)
	for _, tc := range []struct {
		cacheControl     string
		notYet, dueAfter time.Duration
	}{
		{"public, max-age=60", 4*time.Minute + 59*time.Second, 5 * time.Minute},
		{"max-age=86400", 59 * time.Minute, time.Hour},
		{"", 4*time.Minute + 59*time.Second, 5 * time.Minute},
		{`max-age="900", must-revalidate`, 14 * time.Minute, 15 * time.Minute},
	} {
		t.Run(tc.cacheControl, func(t *testing.T) {
			jwks := startJWKSServer(t, jwksKeys(t, iss), tc.cacheControl)
			clock := testclock.New(time.Now())
			v := verifierAt(t, jwks.url, iss.URL(), clock)
			clock.Advance(tc.notYet)
			_, err := v.Verify(context.Background(), rsaToken)
			require.NoError(t, err)
			assert.Never(t, func() bool { return jwks.fetches.Load() > 1 }, 100*time.Millisecond, 10*time.Millisecond, "not due yet")
			clock.Advance(tc.dueAfter - tc.notYet)
			_, err = v.Verify(context.Background(), rsaToken)
			require.NoError(t, err)
			assert.Eventually(t, func() bool { return jwks.fetches.Load() == 2 }, 5*time.Second, 10*time.Millisecond, "due")
		})
	}
}

// An issuer that fails when the JWKS is due does not lock callers out:
// the keys fetched before stay in use, the failure is logged, and the
// issuer is asked again after five minutes, not on every request.
func TestAScheduledRefreshThatFailsKeepsTheKeysAndIsTriedAgainLater(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := startJWKSServer(t, jwksKeys(t, iss), "max-age=300")
	clock := testclock.New(time.Now())
	var logs testsync.Buffer
	v := verifierAt(t, jwks.url, iss.URL(), clock, func(c *auth.VerifierConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	rsaToken, err := iss.Mint(longLived())
	require.NoError(t, err)
	jwks.edit(func(s *jwksServer) { s.down = true })

	clock.Advance(5 * time.Minute)
	for range 20 {
		_, err = v.Verify(context.Background(), rsaToken)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "JWKS refresh failed") }, 5*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 2, jwks.fetches.Load(), "one attempt for all the requests")

	clock.Advance(4 * time.Minute)
	_, err = v.Verify(context.Background(), rsaToken)
	require.NoError(t, err)
	assert.Never(t, func() bool { return jwks.fetches.Load() > 2 }, 100*time.Millisecond, 10*time.Millisecond, "not asked again within five minutes")

	jwks.edit(func(s *jwksServer) { s.down = false })
	clock.Advance(time.Minute)
	_, err = v.Verify(context.Background(), rsaToken)
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return jwks.fetches.Load() == 3 }, 5*time.Second, 10*time.Millisecond, "asked again after five")
}

// The scheduled refresh runs beside requests, never in front of them: an
// issuer that is slow to answer when the JWKS is due does not make the
// request that found it due wait.
func TestARequestIsNotHeldByTheScheduledRefresh(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := startJWKSServer(t, jwksKeys(t, iss), "max-age=300")
	clock := testclock.New(time.Now())
	v := verifierAt(t, jwks.url, iss.URL(), clock)
	rsaToken, err := iss.Mint(longLived())
	require.NoError(t, err)
	release := make(chan struct{})
	jwks.edit(func(s *jwksServer) { s.hold = release })
	t.Cleanup(func() { close(release) })

	clock.Advance(5 * time.Minute)
	done := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), rsaToken); done <- err }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the request waited for the issuer's answer")
	}
	assert.Eventually(t, func() bool { return jwks.fetches.Load() == 2 }, 5*time.Second, 10*time.Millisecond, "the refresh is under way")
}

func TestAJWKSLargerThanAMebibyteIsRefused(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	keys := jwksKeys(t, iss)
	keys[0]["x-padding"] = strings.Repeat("x", 1<<20)
	jwks := startJWKSServer(t, keys, "")
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: jwks.url, Issuer: iss.URL(), Audience: resource})
	require.ErrorContains(t, err, "larger than")
}

// Without a client of the caller's, a redirect may move the JWKS within
// its origin but not hand the choice of keys to another host.
func TestTheDefaultClientFollowsRedirectsOnlyWithinTheJWKSOrigin(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := startJWKSServer(t, jwksKeys(t, iss), "")
	elsewhere := httptest.NewServer(http.RedirectHandler(jwks.url, http.StatusFound))
	t.Cleanup(elsewhere.Close)
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: elsewhere.URL + "/jwks", Issuer: iss.URL(), Audience: resource})
	require.ErrorContains(t, err, "another origin")

	var served atomic.Bool
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		served.Store(true)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": jwksKeys(t, iss)})
	}))
	t.Cleanup(moved.Close)
	_, err = auth.NewVerifier(context.Background(), auth.VerifierConfig{JWKSURL: moved.URL + "/old", Issuer: iss.URL(), Audience: resource})
	require.NoError(t, err)
	assert.True(t, served.Load())
}
