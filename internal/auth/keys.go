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
)

// minRSABits refuses RSA keys too short to trust, should a JWKS publish one.
const minRSABits = 2048

// refreshTimeout bounds a JWKS refresh (forced by an unknown kid, or found
// due), which runs apart from the request that started it (keyRefresher.do).
const refreshTimeout = 10 * time.Second

// keyFor returns the public key for kid fit for alg. An unknown kid
// forces one JWKS refresh (rate limited) so rotated-in keys are picked up
// before the scheduled refresh would find them.
func (v *Verifier) keyFor(ctx context.Context, kid, alg string) (any, error) {
	keys := v.currentKeys(ctx).withID(kid)
	if !readable(keys) {
		refreshed, rerr := v.refresh.do(ctx, v.fetchKeys)
		if rerr == nil && refreshed != nil {
			keys = refreshed.withID(kid)
		}
		if !readable(keys) && rerr != nil && !errors.Is(rerr, errRefreshRateLimited) {
			// The issuer could not be asked: the kid may be a rotated-in key
			// we have not seen, so the token can not be judged (503, not 401).
			return nil, fmt.Errorf("%w: kid %s not cached: %w", ErrKeysUnavailable, quoteCallerText(kid), rerr)
		}
		if len(keys) == 0 {
			return nil, invalid(ReasonUnknownKey, errors.Join(fmt.Errorf("kid %s is not in the JWKS", quoteCallerText(kid)), rerr))
		}
		if !readable(keys) {
			return nil, invalid(ReasonUnknownKey, fmt.Errorf("kid %s: the JWKS's key cannot be read: %w", quoteCallerText(kid), keys[0].unreadable))
		}
	}
	// Keys of different types may share a kid as equivalent alternatives
	// (RFC 7517 §4.5), so the first key with the kid is not necessarily
	// the one for alg: the first that fits it is.
	var errs []error
	for _, key := range keys {
		if key.key == nil {
			continue
		}
		pub, err := publicKeyFor(key, alg)
		if err == nil {
			return pub, nil
		}
		errs = append(errs, err)
	}
	return nil, invalid(ReasonDisallowedAlg, fmt.Errorf("kid %s: %w", quoteCallerText(kid), errors.Join(errs...)))
}

// currentKeys returns the keys fetched last. When they are due to be
// fetched again it starts that fetch and does not wait for it: this
// request, and any until it lands, are judged by the keys at hand.
func (v *Verifier) currentKeys(ctx context.Context) *keySet {
	set := v.keys.Load()
	if set.dueAt(v.cfg.Clock()) && v.scheduled.CompareAndSwap(false, true) {
		go v.scheduledRefresh(context.WithoutCancel(ctx), set)
	}
	return set
}

// scheduledRefresh fetches the JWKS found due in set. If that fails, set's
// keys stay in use and the fetch is tried again after jwksMinInterval: an
// issuer outage neither locks every caller out nor is asked on every
// request.
func (v *Verifier) scheduledRefresh(ctx context.Context, set *keySet) {
	defer v.scheduled.Store(false)
	_, err := v.refresh.do(ctx, v.fetchKeys)
	if err == nil {
		return
	}
	// Decided now: also when the wall clock reads earlier than the keys'
	// fetch (stepped back), or they would be found due on every request.
	kept := *set
	kept.fetched = v.cfg.Clock()
	kept.due = kept.fetched.Add(jwksMinInterval)
	// Unless a refresh forced meanwhile has stored newer keys.
	v.keys.CompareAndSwap(set, &kept)
	if !errors.Is(err, errRefreshRateLimited) {
		v.cfg.Logger.WarnContext(ctx, "auth: JWKS refresh failed; the keys fetched before stay in use",
			"jwks_url", v.cfg.JWKSURL, "retry_in", jwksMinInterval.String(), "error", err.Error())
	}
}

// fetchKeys fetches and reads the JWKS and makes it the keys in use,
// unless a fetch started after it has landed first: a fetch can outlive
// its successor (frozen with its Lambda instance, or overtaken after a
// clock step), and its older answer must not replace the newer one.
func (v *Verifier) fetchKeys(ctx context.Context) (*keySet, error) {
	seq := v.fetches.Add(1)
	body, keep, err := fetchJWKS(ctx, v.cfg.HTTPClient, v.cfg.JWKSURL, v.cfg.Clock())
	if err != nil {
		return nil, err
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, err
	}
	if err := requireReadable(keys); err != nil {
		return nil, err
	}
	now := v.cfg.Clock()
	set := &keySet{keys: keys, fetched: now, due: now.Add(keep), seq: seq}
	for {
		current := v.keys.Load()
		if current != nil && current.seq > seq {
			return current, nil
		}
		if v.keys.CompareAndSwap(current, set) {
			return set, nil
		}
	}
}

// maxCallerTextShown is how much of a token's header member (kid, alg) a
// refusal quotes: it is the caller's text, read before any signature
// check, and a refusal is logged for every rejected request.
const maxCallerTextShown = 64

// quoteCallerText quotes text for a message, cut to maxCallerTextShown
// bytes.
func quoteCallerText(text string) string {
	if len(text) <= maxCallerTextShown {
		return strconv.Quote(text)
	}
	cut := text[:maxCallerTextShown]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%q... (%d bytes)", cut, len(text))
}

// publicKeyFor checks key may verify alg and returns its Go public key:
// key type and curve match, declared use/alg (if any) agree, RSA is long
// enough. The JWT library checks the key type too; this keeps the rule local
// and explicit.
func publicKeyFor(key publicKey, alg string) (any, error) {
	if key.use != "" && key.use != "sig" {
		return nil, fmt.Errorf("key use is %q, not sig", key.use)
	}
	if key.alg != "" && key.alg != alg {
		return nil, fmt.Errorf("key is for %s, token says %s", key.alg, alg)
	}
	raw := key.key
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

// keyRefresher lets at most one refresh (forced or scheduled) run at a
// time and at most one start per minInterval. Callers arriving while one
// runs wait for its result (or until their own context ends) instead of
// starting another. Inside the interval a caller gets the last refresh's
// error if it failed (the issuer is still presumed down), else
// errRefreshRateLimited (the JWKS was current a moment ago).
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
	set     *keySet
	err     error
}

func (r *keyRefresher) wallClock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now().Round(0) // no monotonic reading
}

var errRefreshRateLimited = errors.New("JWKS refresh rate limited")

func (r *keyRefresher) do(ctx context.Context, fetch func(context.Context) (*keySet, error)) (*keySet, error) {
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
	// A wall clock reading earlier than the last start was stepped back:
	// the interval is not held against the caller for the step's length.
	if !stale && !r.last.IsZero() && now.Sub(r.last) < r.minInterval && !now.Before(r.last) {
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
func (r *keyRefresher) run(ctx context.Context, call *refreshCall, fetch func(context.Context) (*keySet, error)) {
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
