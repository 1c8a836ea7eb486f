package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/operation"
)

func TestVerifyAcceptsValidTokens(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	want := auth.Subject{
		ClientID:   "agent-client",
		UserID:     "user-42",
		MerchantID: "merchant-7",
		Roles:      []string{"risk_reviewer", "deployer"},
		Issuer:     iss.URL(),
	}
	azp := goodClaims()
	azp.ClientID = ""
	azp.Extra = map[string]any{"azp": "agent-client"}
	spaceRoles := goodClaims()
	spaceRoles.Roles = nil
	spaceRoles.Extra = map[string]any{"roles": "risk_reviewer deployer"}
	multiAud := goodClaims()
	multiAud.Extra = map[string]any{"aud": []string{"https://other.example", resource}}

	tests := []struct {
		name   string
		claims issuer.Claims
		opts   []issuer.MintOption
	}{
		{"RS256", goodClaims(), nil},
		{"ES256", goodClaims(), []issuer.MintOption{issuer.WithAlgorithm(issuer.ES256)}},
		{"client principal from azp", azp, nil},
		{"roles as space-separated string", spaceRoles, nil},
		{"audience among several", multiAud, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), mint(t, iss, tc.claims, tc.opts...))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	iss := startIssuer(t)
	// Same issuer URL, different keys: its kids are not in iss's JWKS.
	foreign, err := issuer.New(iss.URL())
	require.NoError(t, err)
	v := newVerifier(t, iss)
	pem, err := iss.RSAPublicKeyPEM()
	require.NoError(t, err)

	with := func(edit func(*issuer.Claims)) issuer.Claims {
		c := goodClaims()
		edit(&c)
		return c
	}
	hs256 := func(secret []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			tok, err := iss.MintHS256(goodClaims(), secret)
			require.NoError(t, err)
			return tok
		}
	}
	minted := func(c issuer.Claims, opts ...issuer.MintOption) func(t *testing.T) string {
		return func(t *testing.T) string { return mint(t, iss, c, opts...) }
	}
	tamperSignature := func(t *testing.T) string {
		tok := mint(t, iss, goodClaims())
		i := strings.LastIndexByte(tok, '.') + 10
		b := []byte(tok)
		b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
		return string(b)
	}
	tamperPayload := func(t *testing.T) string {
		// Header and signature of one token, payload of another (other sub).
		good := strings.Split(mint(t, iss, goodClaims()), ".")
		evil := strings.Split(mint(t, iss, with(func(c *issuer.Claims) { c.Subject = "admin" })), ".")
		return good[0] + "." + evil[1] + "." + good[2]
	}
	foreignKeyOurKid := func(t *testing.T) string {
		tok, err := foreign.Mint(goodClaims(), issuer.WithKeyID(iss.KeyID(issuer.RS256)))
		require.NoError(t, err)
		return tok
	}
	unknownKid := func(t *testing.T) string {
		tok, err := foreign.Mint(goodClaims())
		require.NoError(t, err)
		return tok
	}

	tests := []struct {
		name   string
		token  func(t *testing.T) string
		reason string
	}{
		{"expired", minted(goodClaims(), issuer.Expired()), auth.ReasonExpired},
		{"not yet valid", minted(with(func(c *issuer.Claims) { c.NotBefore = time.Now().Add(time.Hour) })), auth.ReasonNotYetValid},
		{"issued in the future", minted(with(func(c *issuer.Claims) { c.Extra = map[string]any{"iat": time.Now().Add(time.Hour).Unix()} })), auth.ReasonNotYetValid},
		{"wrong audience", minted(goodClaims(), issuer.WithAudience("https://other.example/mcp")), auth.ReasonWrongAudience},
		{"audience differs by trailing slash", minted(goodClaims(), issuer.WithAudience(resource+"/")), auth.ReasonWrongAudience},
		{"no audience", minted(goodClaims(), issuer.WithAudience("")), auth.ReasonWrongAudience},
		{"wrong issuer", minted(goodClaims(), issuer.WithIssuer("https://evil.example")), auth.ReasonWrongIssuer},
		{"alg none", func(*testing.T) string { return iss.MintUnsigned(goodClaims()) }, auth.ReasonDisallowedAlg},
		{"HS256 with a random secret", hs256([]byte("0123456789abcdef0123456789abcdef")), auth.ReasonDisallowedAlg},
		{"HS256 with the RSA public key as secret", hs256(pem), auth.ReasonDisallowedAlg},
		{"unknown kid", unknownKid, auth.ReasonUnknownKey},
		{"no kid", minted(goodClaims(), issuer.WithKeyID("")), auth.ReasonUnknownKey},
		{"RS256 naming the EC key", minted(goodClaims(), issuer.WithKeyID(iss.KeyID(issuer.ES256))), auth.ReasonDisallowedAlg},
		{"ES256 naming the RSA key", minted(goodClaims(), issuer.WithAlgorithm(issuer.ES256), issuer.WithKeyID(iss.KeyID(issuer.RS256))), auth.ReasonDisallowedAlg},
		{"tampered signature", tamperSignature, auth.ReasonBadSignature},
		{"tampered payload", tamperPayload, auth.ReasonBadSignature},
		{"signed by another key under our kid", foreignKeyOurKid, auth.ReasonBadSignature},
		{"no exp", minted(with(func(c *issuer.Claims) { c.Extra = map[string]any{"exp": nil} })), auth.ReasonInvalidClaims},
		{"no sub", minted(with(func(c *issuer.Claims) { c.Subject = "" })), auth.ReasonInvalidClaims},
		// Longer than a request key's principal may be: such a caller
		// could authenticate but never write.
		{"sub longer than a principal may be", minted(with(func(c *issuer.Claims) { c.Subject = strings.Repeat("u", operation.MaxPrincipalLen+1) })), auth.ReasonInvalidClaims},
		{"merchant longer than a principal may be", minted(with(func(c *issuer.Claims) { c.MerchantID = strings.Repeat("m", operation.MaxPrincipalLen+1) })), auth.ReasonInvalidClaims},
		{"no client principal", minted(with(func(c *issuer.Claims) { c.ClientID = "" })), auth.ReasonInvalidClaims},
		{"roles not strings", minted(with(func(c *issuer.Claims) { c.Extra = map[string]any{"roles": []int{1}} })), auth.ReasonInvalidClaims},
		{"not a JWT", func(*testing.T) string { return "not-a-token" }, auth.ReasonMalformedToken},
		{"two segments", func(t *testing.T) string {
			p := strings.Split(mint(t, iss, goodClaims()), ".")
			return p[0] + "." + p[1]
		}, auth.ReasonMalformedToken},
		{"oversized", func(*testing.T) string { return strings.Repeat("a", 20<<10) }, auth.ReasonMalformedToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tc.token(t))
			require.Error(t, err)
			assert.ErrorIs(t, err, auth.ErrInvalidToken)
			var te *auth.TokenError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tc.reason, te.Reason, "detail: %v", err)
			assert.NotEmpty(t, te.Description)
		})
	}
}

func TestVerifyEmptyTokenIsMissing(t *testing.T) {
	v := newVerifier(t, startIssuer(t))
	_, err := v.Verify(context.Background(), "")
	assert.ErrorIs(t, err, auth.ErrMissingToken)
	assert.NotErrorIs(t, err, auth.ErrInvalidToken)
}

func TestVerifyAllowsClockSkewOnlyWithinBound(t *testing.T) {
	iss := startIssuer(t)
	recentlyExpired := goodClaims()
	recentlyExpired.Extra = map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix(), "iat": time.Now().Add(-time.Minute).Unix()}
	tok := mint(t, iss, recentlyExpired)

	_, err := newVerifier(t, iss).Verify(context.Background(), tok) // default 30s skew
	assert.NoError(t, err)

	_, err = newVerifier(t, iss, func(c *auth.VerifierConfig) { c.Skew = time.Second }).Verify(context.Background(), tok)
	assert.ErrorIs(t, err, auth.ErrInvalidToken)
}

func TestVerifyHonoursConfiguredAlgorithmsAndClaimNames(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss, func(c *auth.VerifierConfig) {
		c.Algorithms = []string{"ES256"}
		c.MerchantClaim = "tenant"
		c.RolesClaim = "cognito:groups"
	})
	_, err := v.Verify(context.Background(), mint(t, iss, goodClaims()))
	var te *auth.TokenError
	require.ErrorAs(t, err, &te, "RS256 is not pinned")
	assert.Equal(t, auth.ReasonDisallowedAlg, te.Reason)

	c := goodClaims()
	c.MerchantID, c.Roles = "", nil
	c.Extra = map[string]any{"tenant": "t-1", "cognito:groups": []string{"admins"}}
	s, err := v.Verify(context.Background(), mint(t, iss, c, issuer.WithAlgorithm(issuer.ES256)))
	require.NoError(t, err)
	assert.Equal(t, "t-1", s.MerchantID)
	assert.Equal(t, []string{"admins"}, s.Roles)
}

func TestNewVerifierRefusesUnsafeConfig(t *testing.T) {
	iss := startIssuer(t)
	base := auth.VerifierConfig{JWKSURL: iss.JWKSURL(), Issuer: iss.URL(), Audience: resource}
	tests := []struct {
		name   string
		mutate func(*auth.VerifierConfig)
	}{
		{"alg none", func(c *auth.VerifierConfig) { c.Algorithms = []string{"none"} }},
		{"HS256", func(c *auth.VerifierConfig) { c.Algorithms = []string{"RS256", "HS256"} }},
		{"unknown alg", func(c *auth.VerifierConfig) { c.Algorithms = []string{"RS1"} }},
		{"no issuer", func(c *auth.VerifierConfig) { c.Issuer = "" }},
		{"no audience", func(c *auth.VerifierConfig) { c.Audience = "" }},
		{"relative JWKS URL", func(c *auth.VerifierConfig) { c.JWKSURL = "/jwks.json" }},
		{"negative skew", func(c *auth.VerifierConfig) { c.Skew = -time.Second }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mutate(&cfg)
			_, err := auth.NewVerifier(context.Background(), cfg)
			assert.Error(t, err)
		})
	}
}

func TestNewVerifierFailsWhenJWKSCannotBeFetched(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	garbled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html>not a key set</html>"))
	}))
	t.Cleanup(garbled.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + ln.Addr().String() + "/jwks.json"
	require.NoError(t, ln.Close())

	for name, tc := range map[string]struct{ url, says string }{
		"server error":       {failing.URL + "/jwks.json", "500"},
		"connection refused": {closedURL, "connection refused"},
		"not a key set":      {garbled.URL + "/jwks.json", "parse"},
	} {
		t.Run(name, func(t *testing.T) {
			// A generous deadline: the start must fail on the fetch's own
			// error, not by waiting for keys that will never arrive.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := auth.NewVerifier(ctx, auth.VerifierConfig{JWKSURL: tc.url, Issuer: "https://issuer.example", Audience: resource})
			require.Error(t, err)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), tc.url)
		})
	}
}

func TestNewVerifierFetchesTheJWKSOnce(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	_, err := v.Verify(context.Background(), mint(t, iss, goodClaims()))
	require.NoError(t, err)
	// A second fetch at start (the cache's own next to an explicit one)
	// would cost a cold start a round trip to the issuer.
	assert.Never(t, func() bool { return iss.jwksFetches.Load() > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"JWKS fetches at start: want 1")
	assert.EqualValues(t, 1, iss.jwksFetches.Load())
}

func TestVerifyPicksUpRotatedKey(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	oldToken := mint(t, iss, goodClaims())
	require.NoError(t, iss.Rotate())
	fetchesBefore := iss.jwksFetches.Load()

	// Many requests with the new kid at once: one refresh serves them all.
	newToken := mint(t, iss, goodClaims(), issuer.WithAlgorithm(issuer.ES256))
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = v.Verify(context.Background(), newToken) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, fetchesBefore+1, iss.jwksFetches.Load())

	_, err := v.Verify(context.Background(), oldToken)
	assert.NoError(t, err, "keys published before the rotation still verify")
}

func TestUnknownKidRefreshIsRateLimited(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss) // default MinRefreshInterval 30s
	foreign, err := issuer.New(iss.URL())
	require.NoError(t, err)
	fetchesBefore := iss.jwksFetches.Load()

	for range 5 {
		tok, err := foreign.Mint(goodClaims())
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), tok)
		var te *auth.TokenError
		require.True(t, errors.As(err, &te))
		assert.Equal(t, auth.ReasonUnknownKey, te.Reason)
	}
	assert.Equal(t, fetchesBefore+1, iss.jwksFetches.Load(), "unknown kids force at most one fetch per interval")
}

func TestAnUnknownKidRequestThatGivesUpDoesNotStopRotatedKeysBeingFetched(t *testing.T) {
	// An issuer whose JWKS answers can be held, to hang up mid-fetch.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	iss, err := issuer.New("http://" + ln.Addr().String())
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		hold    chan struct{} // closed to release a held JWKS answer
		arrived = make(chan struct{}, 1)
	)
	h := iss.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		held := hold
		mu.Unlock()
		if r.URL.Path == issuer.JWKSPath && held != nil {
			arrived <- struct{}{}
			<-held
		}
		h.ServeHTTP(w, r)
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	v := newVerifier(t, testIssuer{Issuer: iss}) // default MinRefreshInterval 30s

	require.NoError(t, iss.Rotate())
	foreign, err := issuer.New(iss.URL())
	require.NoError(t, err)
	garbage, err := foreign.Mint(goodClaims())
	require.NoError(t, err)
	release := make(chan struct{})
	mu.Lock()
	hold = release
	mu.Unlock()

	// Anyone can send a token with a made-up kid and hang up while the
	// refresh it forced is under way: that refresh is the issuer's answer
	// for everyone, so it must not end with the caller, or its
	// cancellation is remembered as an issuer outage for the interval and
	// every token of a rotated-in key is refused meanwhile.
	gaveUp, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := v.Verify(gaveUp, garbage); done <- err }()
	<-arrived
	cancel()
	require.Error(t, <-done)
	mu.Lock()
	hold = nil
	mu.Unlock()
	close(release)

	_, err = v.Verify(context.Background(), mint(t, testIssuer{Issuer: iss}, goodClaims(), issuer.WithAlgorithm(issuer.ES256)))
	assert.NoError(t, err, "a token of the rotated-in key, the issuer up all along")
}

func TestAKidSharedByAnRSAAndAnECKeyVerifiesBothAlgorithms(t *testing.T) {
	// RFC 7517 §4.5: keys of different types may share a kid as equivalent
	// alternatives. The kid alone then does not pick the key; the token's
	// algorithm does.
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	rsaKid := iss.KeyID(issuer.RS256)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		raw, err := json.Marshal(iss.PublicJWKS())
		require.NoError(t, err)
		var doc struct {
			Keys []map[string]any `json:"keys"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		for _, k := range doc.Keys {
			k["kid"] = rsaKid
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := auth.NewVerifier(ctx, auth.VerifierConfig{JWKSURL: srv.URL + issuer.JWKSPath, Issuer: iss.URL(), Audience: resource})
	require.NoError(t, err)

	for _, alg := range []string{issuer.RS256, issuer.ES256} {
		tok, err := iss.Mint(goodClaims(), issuer.WithAlgorithm(alg), issuer.WithKeyID(rsaKid))
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), tok)
		assert.NoError(t, err, alg)
	}
}

// A kid is the caller's text: a refusal names it, but not at any length,
// or every rejected request could write kilobytes of log.
func TestAnUnknownKidIsNotEchoedAtFullLength(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)
	foreign, err := issuer.New(iss.URL())
	require.NoError(t, err)
	kid := strings.Repeat("k", 10_000)
	tok, err := foreign.Mint(goodClaims(), issuer.WithKeyID(kid))
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), tok)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 400, "the refusal: %.200s...", err)
	assert.Contains(t, err.Error(), `"kkkkkkkk`, "the refusal still names the kid's start")
}
