package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/obs"
)

// jwksFetch is the verifier's first JWKS fetch, started by Build so that it
// runs while the cold start reads its SecureStrings and builds the rest:
// on Lambda each is a network round trip, and done one after another they
// were the longest part of a cold start. Handler waits for it, so a wrong
// issuer URL still fails the start, not the first caller.
type jwksFetch struct {
	done     chan struct{}
	verifier *auth.Verifier
	err      error
}

// startJWKSFetch builds the verifier in the background; nil when no JWKS is
// configured.
func startJWKSFetch(ctx context.Context, cfg Config, tracer *obs.Tracer, logger *slog.Logger) *jwksFetch {
	if cfg.JWKSURL == "" {
		return nil
	}
	vc := auth.VerifierConfig{
		JWKSURL: cfg.JWKSURL, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience,
		HTTPClient: tracer.HTTPClient(&http.Client{Timeout: 5 * time.Second}), Logger: logger,
	}
	if cfg.TrustGatewayAuthorizer {
		// API Gateway's JWT authorizer verifies RSA only: the fallback
		// path accepts what the authorizer accepts, nothing more.
		vc.Algorithms = []string{"RS256", "RS384", "RS512"}
	}
	f := &jwksFetch{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.verifier, f.err = auth.NewVerifier(ctx, vc)
	}()
	// Let the fetch start now: left queued behind this goroutine, which
	// goes on building without blocking, it began up to 0.7 ms later under
	// the emulator, and the start then waited for it.
	runtime.Gosched()
	return f
}

// wait returns the verifier once its first fetch is done.
func (f *jwksFetch) wait(ctx context.Context) (*auth.Verifier, error) {
	select {
	case <-f.done:
		return f.verifier, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the JWKS fetch: %w", ctx.Err())
	}
}
