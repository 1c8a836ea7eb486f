package lambdahttp

import (
	"context"
	"log/slog"
	"time"
)

// Options configures the adapter. The zero value is usable.
type Options struct {
	// WithGatewayClaims receives the claims of API Gateway's JWT authorizer
	// (requestContext.authorizer.jwt.claims) and returns the context the
	// handler will see. It is called only for events that carry JWT authorizer
	// claims, never in plain-HTTP mode, so a forged request can not inject
	// claims: without the gateway the server must verify the bearer itself.
	// Kept as a callback so this package does not depend on the auth package.
	WithGatewayClaims func(ctx context.Context, claims map[string]string) context.Context

	// LocalTimeout bounds each request in plain-HTTP mode, standing in for
	// the Lambda deadline so deadline budgets behave the same on a laptop.
	// Zero means no deadline.
	LocalTimeout time.Duration

	// Logger receives handler panics and server errors. Nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}
