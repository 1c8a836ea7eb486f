package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// minRSABits refuses RSA keys too short to trust, should a JWKS publish one.
const minRSABits = 2048

// refreshTimeout bounds a forced JWKS refresh, which runs apart from the
// request that forced it (keyRefresher.do).
const refreshTimeout = 10 * time.Second

func isSignatureError(err error) bool {
	return errors.Is(err, jws.VerifyError()) || errors.Is(err, jws.VerificationError())
}

// keyFor returns the public key for kid fit for alg. An unknown kid
// forces one JWKS refresh (rate limited) so rotated-in keys are picked up
// before the background refresh would find them.
func (v *Verifier) keyFor(ctx context.Context, kid, alg string) (any, error) {
	set, err := v.cache.Lookup(ctx, v.cfg.JWKSURL)
	if err != nil {
		// Only reachable if the cache lost the resource; try to fetch again.
		if set, err = v.refresh.do(ctx, v.forceRefresh); err != nil || set == nil {
			return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		}
	}
	keys := keysWithID(set, kid)
	if len(keys) == 0 {
		refreshed, rerr := v.refresh.do(ctx, v.forceRefresh)
		if rerr == nil && refreshed != nil {
			keys = keysWithID(refreshed, kid)
		}
		if len(keys) == 0 && rerr != nil && !errors.Is(rerr, errRefreshRateLimited) {
			// The issuer could not be asked: the kid may be a rotated-in key
			// we have not seen, so the token can not be judged (503, not 401).
			return nil, fmt.Errorf("%w: kid %s not cached: %w", ErrKeysUnavailable, quoteKid(kid), rerr)
		}
		if len(keys) == 0 {
			return nil, invalid(ReasonUnknownKey, errors.Join(fmt.Errorf("kid %s is not in the JWKS", quoteKid(kid)), rerr))
		}
	}
	// Keys of different types may share a kid as equivalent alternatives
	// (RFC 7517 §4.5), so the first key with the kid is not necessarily
	// the one for alg: the first that fits it is.
	var errs []error
	for _, key := range keys {
		pub, err := publicKeyFor(key, alg)
		if err == nil {
			return pub, nil
		}
		errs = append(errs, err)
	}
	return nil, invalid(ReasonDisallowedAlg, fmt.Errorf("kid %s: %w", quoteKid(kid), errors.Join(errs...)))
}

// maxKidShown is how much of a kid a refusal quotes: the kid is the
// caller's text, and a refusal is logged for every rejected request.
const maxKidShown = 64

// quoteKid quotes kid for a message, cut to maxKidShown bytes.
func quoteKid(kid string) string {
	if len(kid) <= maxKidShown {
		return strconv.Quote(kid)
	}
	cut := kid[:maxKidShown]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%q... (%d bytes)", cut, len(kid))
}

// keysWithID returns the keys of set whose kid is kid, in set order.
func keysWithID(set jwk.Set, kid string) []jwk.Key {
	var keys []jwk.Key
	for i := range set.Len() {
		key, ok := set.Key(i)
		if !ok {
			continue
		}
		if id, ok := key.KeyID(); ok && id == kid {
			keys = append(keys, key)
		}
	}
	return keys
}

func (v *Verifier) forceRefresh(ctx context.Context) (jwk.Set, error) {
	set, err := v.cache.Refresh(ctx, v.cfg.JWKSURL)
	if err != nil {
		return nil, fmt.Errorf("refresh JWKS: %w", err)
	}
	return set, nil
}

// publicKeyFor exports key as a Go public key and checks it may verify alg:
// key type and curve match, declared use/alg (if any) agree, RSA is long
// enough. jwx checks key/alg compatibility too; this keeps the rule local
// and explicit.
func publicKeyFor(key jwk.Key, alg string) (any, error) {
	if use, ok := key.KeyUsage(); ok && use != "sig" {
		return nil, fmt.Errorf("key use is %q, not sig", use)
	}
	if kalg, ok := key.Algorithm(); ok && kalg.String() != alg {
		return nil, fmt.Errorf("key is for %s, token says %s", kalg, alg)
	}
	pubKey, err := jwk.PublicKeyOf(key)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	var raw any
	if err := jwk.Export(pubKey, &raw); err != nil {
		return nil, fmt.Errorf("export key: %w", err)
	}
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		pk, ok := raw.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%s needs an RSA key, JWKS has %T", alg, raw)
		}
		if pk.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key has %d bits, minimum %d", pk.N.BitLen(), minRSABits)
		}
		return pk, nil
	case strings.HasPrefix(alg, "ES"):
		pk, ok := raw.(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%s needs an EC key, JWKS has %T", alg, raw)
		}
		want := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		if pk.Curve != want {
			return nil, fmt.Errorf("%s needs curve %s, key is on %s", alg, want.Params().Name, pk.Curve.Params().Name)
		}
		return pk, nil
	default:
		return nil, fmt.Errorf("no key rule for %s", alg)
	}
}

// keyRefresher lets at most one forced refresh run at a time and at most one
// start per minInterval. Callers arriving while one runs wait for its result
// (or until their own context ends) instead of starting another. Inside the
// interval a caller gets the last refresh's error if it failed (the issuer is
// still presumed down), else errRefreshRateLimited (the JWKS was current a
// moment ago).
//
// A refresh started more than refreshTimeout ago by the wall clock is
// stale: it outlived the invocation that started it and was frozen with
// the Lambda instance, and at thaw its deadline has passed. The next caller
// neither joins it nor is held off by the interval its start opened; it
// starts a new one. (The wall clock, because it is what surely advanced
// while the instance was frozen.)
type keyRefresher struct {
	minInterval time.Duration
	now         func() time.Time // the wall clock; nil: time.Now

	mu       sync.Mutex
	inflight *refreshCall
	last     time.Time
	lastErr  error
}

type refreshCall struct {
	started time.Time // wall clock
	done    chan struct{}
	set     jwk.Set
	err     error
}

func (r *keyRefresher) wallClock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now().Round(0) // no monotonic reading
}

var errRefreshRateLimited = errors.New("JWKS refresh rate limited")

func (r *keyRefresher) do(ctx context.Context, fetch func(context.Context) (jwk.Set, error)) (jwk.Set, error) {
	r.mu.Lock()
	now := r.wallClock()
	stale := r.inflight != nil && now.Sub(r.inflight.started) >= refreshTimeout
	if call := r.inflight; call != nil && !stale {
		r.mu.Unlock()
		select {
		case <-call.done:
			return call.set, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !stale && !r.last.IsZero() && now.Sub(r.last) < r.minInterval {
		lastErr := r.lastErr
		r.mu.Unlock()
		if lastErr != nil {
			return nil, lastErr
		}
		return nil, errRefreshRateLimited
	}
	call := &refreshCall{started: now, done: make(chan struct{})}
	r.inflight = call
	r.last = now
	r.mu.Unlock()

	// The fetch answers every caller waiting on it, and its error stands
	// for the issuer for the next minInterval, so it must not end with the
	// caller that happened to start it: anyone can send a made-up kid and
	// hang up, and that cancellation would otherwise be remembered as an
	// issuer outage, refusing every rotated-in key meanwhile. It keeps
	// ctx's values (the trace) and is bounded by refreshTimeout instead.
	go r.run(context.WithoutCancel(ctx), call, fetch)
	select {
	case <-call.done:
		return call.set, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run performs one refresh for call and records its outcome.
func (r *keyRefresher) run(ctx context.Context, call *refreshCall, fetch func(context.Context) (jwk.Set, error)) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	set, err := fetch(ctx)

	r.mu.Lock()
	call.set, call.err = set, err
	// A stale refresh finishing after its successor started speaks for
	// neither the issuer now nor the successor's callers.
	if r.inflight == call {
		r.inflight = nil
		r.lastErr = err
	}
	r.mu.Unlock()
	close(call.done)
}
