package obs

import (
	"context"
	"net/http"

	"github.com/aws/aws-xray-sdk-go/xray"
)

// Tracer adds X-Ray segments when enabled and is a pass-through otherwise.
//
// Enable it only under Lambda with active tracing (the function main
// decides, e.g. from AWS_LAMBDA_FUNCTION_NAME plus a config switch). There
// the Lambda runtime puts the trace header into the invocation context
// (key xray.LambdaTraceHeaderKey, the same value as _X_AMZN_TRACE_ID) and
// the SDK builds a facade segment from it; our spans become subsegments
// sent over UDP to the local daemon Lambda runs. Outside Lambda leave it
// disabled: the SDK would send UDP to 127.0.0.1:2000 with no daemon there.
//
// The X-Ray SDK keeps global configuration (daemon address, sampling,
// context-missing strategy; see xray.Configure). Tracer does not change
// it, so all Tracers in a process share the SDK's settings.
type Tracer struct {
	enabled bool
}

// NewTracer returns a tracer; disabled, every method passes through.
func NewTracer(enabled bool) *Tracer {
	return &Tracer{enabled: enabled}
}

// Enabled reports whether the tracer records anything.
func (t *Tracer) Enabled() bool { return t != nil && t.enabled }

// traceable reports whether ctx can carry a subsegment: it holds a segment
// already, or the Lambda trace header the SDK turns into a facade segment.
// Without either the SDK would only log "segment cannot be found" (or
// panic, under AWS_XRAY_CONTEXT_MISSING=RUNTIME_ERROR), so we skip it.
func traceable(ctx context.Context) bool {
	if xray.GetSegment(ctx) != nil {
		return true
	}
	h, ok := ctx.Value(xray.LambdaTraceHeaderKey).(string)
	return ok && h != ""
}

// Segment runs fn inside a subsegment named name (xray.Capture) when the
// tracer is enabled and ctx is traceable, recording fn's error on it.
// Otherwise it just calls fn(ctx). fn's error is returned unchanged.
func (t *Tracer) Segment(ctx context.Context, name string, fn func(context.Context) error) error {
	if !t.Enabled() || !traceable(ctx) {
		return fn(ctx)
	}
	return xray.Capture(ctx, name, fn)
}

// HTTPClient returns c (http.DefaultClient if nil) wrapped so each request
// made with a traceable context records a subsegment and carries the
// X-Amzn-Trace-Id header downstream (never the caller's bearer token).
// Disabled, it returns c itself.
func (t *Tracer) HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	if !t.Enabled() {
		return c
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	traced := xray.RoundTripper(base)
	return &http.Client{
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if traceable(r.Context()) {
				return traced.RoundTrip(r)
			}
			return base.RoundTrip(r)
		}),
		CheckRedirect: c.CheckRedirect,
		Jar:           c.Jar,
		Timeout:       c.Timeout,
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Handler traces each request under the fixed name. Under Lambda (the
// request context carries the invocation's trace header or segment) a
// function may not open its own segment, so the request becomes a
// subsegment of the Lambda's. Elsewhere it is xray.Handler with a fixed
// segment namer, continuing an incoming X-Amzn-Trace-Id. Disabled, it
// returns h itself.
func (t *Tracer) Handler(name string, h http.Handler) http.Handler {
	if !t.Enabled() {
		return h
	}
	segmentHandler := xray.Handler(xray.NewFixedSegmentNamer(name), h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !traceable(r.Context()) {
			segmentHandler.ServeHTTP(w, r)
			return
		}
		_ = xray.Capture(r.Context(), name, func(ctx context.Context) error {
			h.ServeHTTP(w, r.WithContext(ctx))
			return nil
		})
	})
}
