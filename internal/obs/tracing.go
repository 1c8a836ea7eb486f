package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-xray-sdk-go/daemoncfg"
	"github.com/aws/aws-xray-sdk-go/header"
)

// Tracer records X-Ray segments when enabled and is a pass-through
// otherwise. It writes segment documents over UDP to the X-Ray daemon, the
// protocol the Lambda runtime's daemon and the stand-alone daemon read:
// one datagram per document, a JSON header line then the document.
//
// Why not aws-xray-sdk-go's xray package: it links the AWS SDK for Go v1
// (its sampling client), gRPC and fasthttp, which tripled the binary and
// took most of the cold start's package initialisation. This emitter uses
// the SDK's small header and daemoncfg packages and does the rest itself
// (docs/design.md, "Tracing without the xray package").
//
// Under Lambda (the invocation context carries the sampled trace header
// aws-lambda-go puts there) spans become subsegments of the function's
// segment, which Lambda itself records. Outside Lambda, Handler opens a
// segment per request, continuing an incoming X-Amzn-Trace-Id.
type Tracer struct {
	enabled bool
	daemon  *net.UDPAddr
	logger  *slog.Logger
	now     func() time.Time

	connOnce sync.Once
	conn     *net.UDPConn
	connErr  error
}

// TracerConfig configures a Tracer.
type TracerConfig struct {
	// Enabled: record spans. Off, every method passes through.
	Enabled bool
	// DaemonAddr is the daemon's UDP address. Nil: AWS_XRAY_DAEMON_ADDRESS
	// (which Lambda sets), else 127.0.0.1:2000.
	DaemonAddr *net.UDPAddr
	// Logger receives failures to send a document (nil: discarded).
	// Tracing never fails a request.
	Logger *slog.Logger
	// Clock stamps spans; nil means time.Now.
	Clock func() time.Time
}

// NewTracer returns a tracer. It refuses an unparsable
// AWS_XRAY_DAEMON_ADDRESS when enabled; it opens no socket until the first
// span ends.
func NewTracer(cfg TracerConfig) (*Tracer, error) {
	t := &Tracer{enabled: cfg.Enabled, daemon: cfg.DaemonAddr, logger: cfg.Logger, now: cfg.Clock}
	if t.logger == nil {
		t.logger = slog.New(slog.DiscardHandler)
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.enabled && t.daemon == nil {
		ep, err := daemoncfg.GetDaemonEndpointsFromEnv()
		if err != nil {
			return nil, fmt.Errorf("tracing: AWS_XRAY_DAEMON_ADDRESS: %w", err)
		}
		if ep == nil {
			ep = daemoncfg.GetDefaultDaemonEndpoints()
		}
		t.daemon = ep.UDPAddr
	}
	return t, nil
}

// Enabled reports whether the tracer records anything.
func (t *Tracer) Enabled() bool { return t != nil && t.enabled }

// Close releases the daemon socket. Spans that end later are dropped.
func (t *Tracer) Close() error {
	if t == nil {
		return nil
	}
	t.connOnce.Do(func() { t.connErr = errTracerClosed }) // orders Close after any dial
	if t.conn == nil {
		return nil
	}
	return t.conn.Close()
}

var errTracerClosed = errors.New("tracer closed")

// daemonDocHeader precedes every document in a datagram.
const daemonDocHeader = `{"format":"json","version":1}` + "\n"

// send writes one segment document to the daemon. Failures are logged and
// dropped: a trace is never worth failing or slowing a request for.
func (t *Tracer) send(doc []byte) {
	t.connOnce.Do(func() { t.conn, t.connErr = net.DialUDP("udp", nil, t.daemon) })
	if t.connErr != nil {
		t.dropped(fmt.Errorf("x-ray daemon %s: %w", t.daemon, t.connErr))
		return
	}
	msg := make([]byte, 0, len(daemonDocHeader)+len(doc))
	msg = append(append(msg, daemonDocHeader...), doc...)
	_, err := t.conn.Write(msg)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// No daemon listening (a local run under the emulator): the kernel
		// reports the previous datagram's ICMP refusal on this write. Not a
		// fault of this process: a debug line, not a warning per span.
		t.logger.Debug("no x-ray daemon listening", "addr", t.daemon.String())
	case err != nil:
		t.dropped(fmt.Errorf("send segment to x-ray daemon %s: %w", t.daemon, err))
	}
}

func (t *Tracer) dropped(err error) {
	t.logger.Warn("trace segment dropped", "error", err.Error())
}

// Segment runs fn inside a subsegment named name when the tracer is
// enabled and ctx is traced (a span, or a sampled Lambda invocation),
// recording fn's error on it. Otherwise it just calls fn(ctx). fn's error
// is returned unchanged.
func (t *Tracer) Segment(ctx context.Context, name string, fn func(context.Context) error) error {
	ctx, s := t.startSubsegment(ctx, name)
	if s == nil {
		return fn(ctx)
	}
	defer s.finishOnPanic(nil)
	err := fn(ctx)
	s.finish(err)
	return err
}

// Annotate puts string annotations on the span ctx runs in, so traces can
// be filtered by them (annotation.state = "UNKNOWN"). Untraced contexts
// are left alone; so is the Lambda function segment, which takes none.
func Annotate(ctx context.Context, kv map[string]string) {
	if s := spanFrom(ctx); s != nil {
		s.annotate(kv)
	}
}

// TraceID is the X-Ray trace id of ctx: its span's, or the Root of the
// Lambda invocation's trace header (sampled or not). Empty when untraced.
func TraceID(ctx context.Context) string {
	if s := spanFrom(ctx); s != nil {
		return s.traceID
	}
	raw, _ := ctx.Value(LambdaTraceHeaderKey).(string)
	if raw == "" {
		return ""
	}
	return header.FromString(raw).TraceID
}

// HTTPClient returns c (http.DefaultClient if nil) wrapped so each request
// made with a traced context records a subsegment (namespace remote) and
// carries the X-Amzn-Trace-Id header downstream (never the caller's bearer
// token). Disabled, it returns c itself.
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
	return &http.Client{
		Transport:     tracedTransport{tracer: t, base: base},
		CheckRedirect: c.CheckRedirect,
		Jar:           c.Jar,
		Timeout:       c.Timeout,
	}
}

type tracedTransport struct {
	tracer *Tracer
	base   http.RoundTripper
}

func (tt tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, s := tt.tracer.startSubsegment(r.Context(), r.URL.Host)
	if s == nil {
		return tt.base.RoundTrip(r)
	}
	s.update(func(d *segmentDoc) {
		d.Namespace = "remote"
		d.HTTP = &httpDoc{Request: &httpRequestDoc{Method: r.Method, URL: redactedURL(r)}}
	})
	r = r.Clone(ctx) // a RoundTripper must not modify the caller's request
	r.Header.Set(TraceHeader, s.downstreamHeader())
	resp, err := tt.base.RoundTrip(r)
	if err == nil {
		s.httpStatus(resp.StatusCode, resp.ContentLength)
	}
	s.finish(err)
	return resp, err
}

// redactedURL is the request URL without query or user info: query
// strings may carry identifiers that do not belong in a trace. A server
// request's URL has no host; it is taken from the Host header.
func redactedURL(r *http.Request) string {
	u := url.URL{Scheme: r.URL.Scheme, Host: r.URL.Host, Path: r.URL.Path}
	if u.Host == "" {
		u.Scheme, u.Host = "https", r.Host
		if r.TLS == nil && r.Header.Get("X-Forwarded-Proto") != "https" {
			u.Scheme = "http"
		}
	}
	return u.String()
}

// Handler traces each request under the fixed name. Under Lambda the
// request becomes a subsegment of the function's segment (a function may
// not open its own segment). Elsewhere it opens a segment, continuing an
// incoming X-Amzn-Trace-Id (Sampled=0 there turns tracing off for the
// request) and answering with the trace id. Disabled, it returns h itself.
func (t *Tracer) Handler(name string, h http.Handler) http.Handler {
	if !t.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, s := t.startSubsegment(r.Context(), name)
		if s == nil {
			in := header.FromString(r.Header.Get(TraceHeader))
			if in.SamplingDecision == header.NotSampled || lambdaInvocation(r.Context()) {
				h.ServeHTTP(w, r)
				return
			}
			// The caller's header is untrusted input: X-Ray rejects a
			// segment whose ids are malformed, and every subsegment under
			// it, so such a Root starts a new trace and such a Parent is
			// not recorded.
			traceID, parentID := in.TraceID, in.ParentID
			if !validTraceID(traceID) {
				traceID, parentID = "", ""
			}
			ctx, s = t.startSegment(r.Context(), name, traceID)
			if validSegmentID(parentID) {
				s.doc.ParentID = parentID
			}
			w.Header().Set(TraceHeader, "Root="+s.traceID+";Sampled=1")
		}
		s.update(func(d *segmentDoc) {
			d.HTTP = &httpDoc{Request: &httpRequestDoc{Method: r.Method, URL: redactedURL(r)}}
		})
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		// A panic is answered 500 by whoever recovers it above (the Lambda
		// adapter, the net/http server): record that answer on the span.
		defer s.finishOnPanic(func() { s.httpStatus(http.StatusInternalServerError, -1) })
		h.ServeHTTP(sw, r.WithContext(ctx))
		s.httpStatus(sw.status, -1)
		s.finish(nil)
	})
}

// lambdaInvocation reports whether ctx belongs to a Lambda invocation
// (sampled or not): such a request never opens a segment of its own.
func lambdaInvocation(ctx context.Context) bool {
	raw, _ := ctx.Value(LambdaTraceHeaderKey).(string)
	return raw != ""
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

// Flush keeps streaming (server-sent events) working through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
