package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	defaultSkew               = 30 * time.Second
	defaultMinRefreshInterval = 30 * time.Second
	// maxTokenLen refuses absurd inputs before any parsing.
	maxTokenLen = 16 << 10
)

// defaultAlgorithms are accepted when VerifierConfig.Algorithms is empty. A
// fresh slice each call: the result ends up in a Verifier's config, and a
// shared one would let one caller's change reach every later Verifier.
func defaultAlgorithms() []string { return []string{"RS256", "ES256"} }

// permittedAlgorithm reports whether name is one of the only algorithms a
// Verifier can be configured for: asymmetric ones. "none" and HMAC (HS*)
// are never accepted, whatever the configuration, since a JWKS holds public
// keys and HMAC over a public key is the classic algorithm-confusion
// forgery.
func permittedAlgorithm(name string) bool {
	switch name {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512":
		return true
	}
	return false
}

// VerifierConfig configures [NewVerifier].
type VerifierConfig struct {
	// JWKSURL is where the issuer publishes its public keys. Required.
	JWKSURL string
	// Issuer must equal the token's iss exactly. Required.
	Issuer string
	// Audience is this server's resource URL; the token's aud must contain
	// it exactly (no normalisation). Required.
	Audience string
	// Algorithms pins the accepted JWS algorithms. Default RS256, ES256. Only
	// RS*, PS* and ES* are permitted; anything else is a configuration error.
	Algorithms []string
	// Skew tolerated on exp, nbf and iat. Default 30s; negative is an error.
	Skew time.Duration
	// MerchantClaim names the merchant/tenant claim. Default "merchant_id".
	MerchantClaim string
	// RolesClaim names the roles claim (array of strings or space-separated
	// string). Default "roles".
	RolesClaim string
	// HTTPClient fetches the JWKS. Default: a client with a 10 s timeout.
	// Either follows redirects only within the JWKS URL's origin, unless
	// the given client has a CheckRedirect of its own.
	HTTPClient *http.Client
	// MinRefreshInterval is the least time between two JWKS fetches forced by
	// tokens with an unknown kid, so garbage kids cannot turn into a flood of
	// fetches. Default 30s.
	MinRefreshInterval time.Duration
	// Logger receives failures of the scheduled JWKS refresh. Default:
	// discarded.
	Logger *slog.Logger
	// Clock is the wall clock, for tokens' exp, nbf and iat and for when
	// the JWKS is due to be fetched again. Default time.Now (tests set it).
	Clock func() time.Time
}

// Verifier verifies bearer tokens against a JWKS. Safe for concurrent use.
//
// It runs nothing in the background between requests (a Lambda instance
// is frozen then): the JWKS is fetched again when a request finds it due,
// while that request and the next go on with the keys already fetched,
// and at once, rate limited, when a token names a kid it does not hold.
type Verifier struct {
	cfg       VerifierConfig
	names     ClaimNames
	algs      map[string]bool
	parser    *jwt.Parser
	validator *jwt.Validator
	keys      atomic.Pointer[keySet]
	refresh   keyRefresher
	// scheduled is set while a refresh found due by a request runs.
	scheduled atomic.Bool
	// fetches numbers the JWKS fetches as they start.
	fetches atomic.Uint64
}

func (cfg VerifierConfig) withDefaults() (VerifierConfig, error) {
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return cfg, fmt.Errorf("auth: JWKSURL %q is not an absolute http(s) URL", cfg.JWKSURL)
	}
	if cfg.Issuer == "" {
		return cfg, errors.New("auth: Issuer is required")
	}
	if cfg.Audience == "" {
		return cfg, errors.New("auth: Audience (this server's resource URL) is required")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = defaultAlgorithms()
	}
	if cfg.Skew < 0 {
		return cfg, fmt.Errorf("auth: negative Skew %s", cfg.Skew)
	}
	if cfg.Skew == 0 {
		cfg.Skew = defaultSkew
	}
	if cfg.MinRefreshInterval <= 0 {
		cfg.MinRefreshInterval = defaultMinRefreshInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = defaultJWKSClient()
	} else {
		cfg.HTTPClient = withSameOriginRedirects(cfg.HTTPClient)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// NewVerifier builds a Verifier and fetches the JWKS once, so a wrong URL or
// an unreachable issuer fails at startup rather than on the first request.
// ctx bounds that first fetch only; later fetches are started by requests
// (a JWKS found due, a kid not held) and bounded by refreshTimeout.
func NewVerifier(ctx context.Context, cfg VerifierConfig) (*Verifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	algs := make(map[string]bool, len(cfg.Algorithms))
	for _, name := range cfg.Algorithms {
		if !permittedAlgorithm(name) {
			return nil, fmt.Errorf("auth: algorithm %q is not permitted (asymmetric RS*/PS*/ES* only)", name)
		}
		algs[name] = true
	}
	v := &Verifier{
		cfg:   cfg,
		names: ClaimNames{MerchantClaim: cfg.MerchantClaim, RolesClaim: cfg.RolesClaim}.withDefaults(),
		algs:  algs,
		// Both read-only once built, so one serves every request. The
		// parser checks the signature only; the claims are judged in
		// Verify, in an order of its own.
		parser: jwt.NewParser(jwt.WithValidMethods(cfg.Algorithms), jwt.WithoutClaimsValidation()),
		validator: jwt.NewValidator(
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Skew),
			jwt.WithTimeFunc(cfg.Clock),
		),
		refresh: keyRefresher{minInterval: cfg.MinRefreshInterval, now: cfg.Clock},
	}
	if _, err := v.fetchKeys(ctx); err != nil {
		return nil, fmt.Errorf("auth: fetch JWKS %s: %w", cfg.JWKSURL, err)
	}
	return v, nil
}

// HasKeyType reports whether the JWKS holds a signing key of type kty
// ("RSA", "EC"), e.g. to check an issuer fits API Gateway's JWT authorizer,
// which verifies RSA signatures only.
func (v *Verifier) HasKeyType(kty string) bool {
	return v.keys.Load().hasSigningKeyType(kty)
}

// KeySetHasSigningKeyType is HasKeyType for a key set read elsewhere (the
// deploy checks the keys API Gateway's authorizer will use): raw is a JWKS
// document, {"keys": [...]}. A key this package can not read (a key type
// it does not know) is passed over, as a verifier would pass it over.
func KeySetHasSigningKeyType(raw []byte, kty string) (bool, error) {
	keys, err := parseJWKS(raw)
	if err != nil {
		return false, fmt.Errorf("auth: %w", err)
	}
	return (&keySet{keys: keys}).hasSigningKeyType(kty), nil
}

// Issuer returns the issuer this verifier enforces.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Audience returns the audience (resource URL) this verifier enforces.
func (v *Verifier) Audience() string { return v.cfg.Audience }

// Verify checks rawToken (the bearer value, without "Bearer ") and returns
// its Subject. Errors: [ErrMissingToken] for an empty token; a *[TokenError]
// (errors.Is ErrInvalidToken) for any refused token; an error wrapping
// [ErrKeysUnavailable] when no keys could be obtained at all, or the token's
// kid is not cached and the issuer could not be asked for it (an outage).
func (v *Verifier) Verify(ctx context.Context, rawToken string) (Subject, error) {
	if rawToken == "" {
		return Subject{}, ErrMissingToken
	}
	if len(rawToken) > maxTokenLen {
		return Subject{}, invalid(ReasonMalformedToken, fmt.Errorf("token is %d bytes, limit %d", len(rawToken), maxTokenLen))
	}
	hdr, err := splitToken(rawToken)
	if err != nil {
		return Subject{}, invalid(ReasonMalformedToken, err)
	}
	// Pin the algorithm before touching keys: "none" and HS* stop here even
	// when the kid names a real key.
	if !v.algs[hdr.Alg] {
		return Subject{}, invalid(ReasonDisallowedAlg, fmt.Errorf("alg %s is not accepted", quoteCallerText(hdr.Alg)))
	}
	if hdr.Kid == "" {
		return Subject{}, invalid(ReasonUnknownKey, errors.New("token header has no kid"))
	}
	key, err := v.keyFor(ctx, hdr.Kid, hdr.Alg)
	if err != nil {
		return Subject{}, err
	}
	token, err := v.parser.Parse(rawToken, func(t *jwt.Token) (any, error) {
		// The parser reads the header again: it must verify with the alg
		// keyFor found key fit for, not another reading of it.
		if t.Method.Alg() != hdr.Alg {
			return nil, fmt.Errorf("header alg read as %s and as %s", quoteCallerText(hdr.Alg), quoteCallerText(t.Method.Alg()))
		}
		return key, nil
	})
	if err != nil {
		return Subject{}, classifyJWTError(err)
	}
	claims, ok := token.Claims.(jwt.MapClaims)
	if !ok || claims == nil {
		return Subject{}, invalid(ReasonMalformedToken, errors.New("payload is not a JSON object"))
	}
	if err := checkNumericDates(claims); err != nil {
		return Subject{}, invalid(ReasonInvalidClaims, err)
	}
	if err := v.validator.Validate(claims); err != nil {
		return Subject{}, classifyJWTError(err)
	}
	if iss, err := claims.GetIssuer(); err != nil || iss != v.cfg.Issuer {
		return Subject{}, invalid(ReasonWrongIssuer, fmt.Errorf("iss %s is not %s", quoteCallerText(fmt.Sprint(claims["iss"])), v.cfg.Issuer))
	}
	// aud must contain this resource exactly (RFC 8707, RFC 9068 §4): no
	// normalisation, and a token without aud is for no resource at all.
	aud, err := claims.GetAudience()
	if err != nil {
		return Subject{}, invalid(ReasonWrongAudience, fmt.Errorf("aud: %w", err))
	}
	if !slices.Contains(aud, v.cfg.Audience) {
		return Subject{}, invalid(ReasonWrongAudience, fmt.Errorf("aud %s does not name %s", quoteCallerText(strings.Join(aud, " ")), v.cfg.Audience))
	}
	s, err := SubjectFromClaims(claims, v.names)
	if err != nil {
		return Subject{}, invalid(ReasonInvalidClaims, err)
	}
	return s, nil
}

// maxNumericDate is 9999-12-31T23:59:59Z: a NumericDate beyond it (or
// before 1970) is no date a token means, and converted to a time it wraps.
const maxNumericDate = 253402300799

// checkNumericDates requires exp, nbf and iat, where present, to be JSON
// numbers a time can hold; exp must also be after 1970 (the library takes
// an exp of 0 for none at all).
func checkNumericDates(claims jwt.MapClaims) error {
	for _, name := range []string{"exp", "nbf", "iat"} {
		raw, present := claims[name]
		if !present {
			continue
		}
		n, ok := raw.(float64)
		if !ok {
			return fmt.Errorf("%s is not a number", name)
		}
		if n < 0 || n > maxNumericDate || (name == "exp" && n == 0) {
			return fmt.Errorf("%s %g is out of range", name, n)
		}
	}
	return nil
}

type tokenHeader struct {
	Alg, Kid string
}

// splitToken accepts only the JWS compact form and reads the header's
// alg and kid by their exact names (JSON member names are case sensitive;
// encoding/json matches struct fields regardless of case, and the JWT
// library reads the same header as a map). A header with crit is refused:
// no extension is understood here (RFC 7515 §4.1.11), b64 among them.
func splitToken(raw string) (tokenHeader, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return tokenHeader{}, fmt.Errorf("not a compact JWS: %d segments", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return tokenHeader{}, fmt.Errorf("decode header: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || members == nil {
		return tokenHeader{}, errors.New("parse header: not a JSON object")
	}
	if _, ok := members["crit"]; ok {
		return tokenHeader{}, errors.New("header has crit: no JWS extension is understood here")
	}
	var h tokenHeader
	for name, into := range map[string]*string{"alg": &h.Alg, "kid": &h.Kid} {
		if raw, ok := members[name]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return tokenHeader{}, fmt.Errorf("parse header: %s is not a string", name)
			}
		}
	}
	return h, nil
}

// classifyJWTError names the reason a parsed token was refused. The
// parser joins every claim it found wrong; the first reason below wins.
func classifyJWTError(err error) *TokenError {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalid(ReasonMalformedToken, err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return invalid(ReasonBadSignature, err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalid(ReasonExpired, err)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalid(ReasonNotYetValid, err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidClaims):
		return invalid(ReasonInvalidClaims, err)
	default:
		return invalid(ReasonMalformedToken, err)
	}
}
