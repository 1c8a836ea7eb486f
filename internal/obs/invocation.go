package obs

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/intentgate/intentgate/internal/requestid"
)

// Log keys every line of an invocation carries, so the API Gateway access
// log (gateway request id), audit records and X-Ray traces join.
const (
	KeyFunction         = "function"
	KeyColdStart        = "cold_start"
	KeyTraceID          = "xray_trace_id"
	KeyGatewayRequestID = "gateway_request_id"
)

// Invocation identifies one function invocation in its logs.
type Invocation struct {
	Function  string // AWS_LAMBDA_FUNCTION_NAME
	ColdStart bool   // the first invocation of this process
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv for the log handler of [JoinKeys].
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation ctx carries.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(Invocation)
	return inv, ok
}

// ColdStarts tells a process's first invocation from the others. One per
// process (the composition root owns it); safe for concurrent use.
type ColdStarts struct{ seen atomic.Bool }

// First reports true exactly once.
func (c *ColdStarts) First() bool { return c.seen.CompareAndSwap(false, true) }

// JoinKeys wraps h so every record logged with a context carries the
// invocation's function, cold_start, gateway_request_id and the X-Ray trace
// id (each only when known).
func JoinKeys(h slog.Handler) slog.Handler { return joinKeys{next: h} }

type joinKeys struct{ next slog.Handler }

func (j joinKeys) Enabled(ctx context.Context, l slog.Level) bool { return j.next.Enabled(ctx, l) }

func (j joinKeys) Handle(ctx context.Context, r slog.Record) error {
	if inv, ok := InvocationFrom(ctx); ok {
		if inv.Function != "" {
			r.AddAttrs(slog.String(KeyFunction, inv.Function))
		}
		r.AddAttrs(slog.Bool(KeyColdStart, inv.ColdStart))
	}
	if id := requestid.From(ctx).Gateway; id != "" {
		r.AddAttrs(slog.String(KeyGatewayRequestID, id))
	}
	if id := TraceID(ctx); id != "" {
		r.AddAttrs(slog.String(KeyTraceID, id))
	}
	return j.next.Handle(ctx, r)
}

func (j joinKeys) WithAttrs(as []slog.Attr) slog.Handler {
	return joinKeys{next: j.next.WithAttrs(as)}
}

func (j joinKeys) WithGroup(name string) slog.Handler { return joinKeys{next: j.next.WithGroup(name)} }
