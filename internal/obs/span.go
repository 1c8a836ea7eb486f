package obs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-xray-sdk-go/header"
)

// LambdaTraceHeaderKey is the context key under which aws-lambda-go puts
// the invocation's X-Amzn-Trace-Id (the same value as _X_AMZN_TRACE_ID).
// aws-lambda-go uses this plain string as the key, so it must be one too.
const LambdaTraceHeaderKey = "x-amzn-trace-id"

// TraceHeader is the HTTP header that carries X-Ray trace context.
const TraceHeader = "X-Amzn-Trace-Id"

// span is one X-Ray segment or subsegment. Each span is sent to the daemon
// as its own segment document when it ends (a subsegment names its parent
// and trace), so no tree is kept and no document grows with the number of
// calls an invocation makes.
type span struct {
	tracer  *Tracer
	traceID string
	id      string

	mu  sync.Mutex
	doc segmentDoc // guarded by mu until the span ends
	end bool
}

// segmentDoc is the X-Ray segment document: the fields this project sets.
type segmentDoc struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	TraceID     string            `json:"trace_id"`
	ParentID    string            `json:"parent_id,omitempty"`
	Type        string            `json:"type,omitempty"` // "subsegment" when sent on its own
	StartTime   float64           `json:"start_time"`
	EndTime     float64           `json:"end_time"`
	Namespace   string            `json:"namespace,omitempty"` // "aws" or "remote"
	Error       bool              `json:"error,omitempty"`     // 4xx
	Throttle    bool              `json:"throttle,omitempty"`  // 429
	Fault       bool              `json:"fault,omitempty"`     // 5xx or a failed call
	Cause       *causeDoc         `json:"cause,omitempty"`
	HTTP        *httpDoc          `json:"http,omitempty"`
	AWS         map[string]string `json:"aws,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type causeDoc struct {
	Exceptions []exceptionDoc `json:"exceptions"`
}

type exceptionDoc struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

type httpDoc struct {
	Request  *httpRequestDoc  `json:"request,omitempty"`
	Response *httpResponseDoc `json:"response,omitempty"`
}

type httpRequestDoc struct {
	Method string `json:"method,omitempty"`
	URL    string `json:"url,omitempty"`
}

type httpResponseDoc struct {
	Status        int   `json:"status,omitempty"`
	ContentLength int64 `json:"content_length,omitempty"`
}

type spanKey struct{}

// spanFrom returns the span ctx runs in, if any.
func spanFrom(ctx context.Context) *span {
	s, _ := ctx.Value(spanKey{}).(*span)
	return s
}

// lambdaParent returns the sampled trace context of the Lambda invocation
// ctx belongs to: the function's own segment, which the Lambda service
// records and which takes subsegments but no annotations.
func lambdaParent(ctx context.Context) (traceID, parentID string, ok bool) {
	raw, _ := ctx.Value(LambdaTraceHeaderKey).(string)
	if raw == "" {
		return "", "", false
	}
	h := header.FromString(raw)
	if h.TraceID == "" || h.ParentID == "" || h.SamplingDecision != header.Sampled {
		return "", "", false
	}
	return h.TraceID, h.ParentID, true
}

// startSubsegment opens a subsegment named name under the span in ctx or,
// under Lambda, under the function's segment. Without either (untraced,
// not sampled) it returns ctx and nil: callers treat a nil span as "not
// traced".
func (t *Tracer) startSubsegment(ctx context.Context, name string) (context.Context, *span) {
	if !t.Enabled() {
		return ctx, nil
	}
	var traceID, parentID string
	if parent := spanFrom(ctx); parent != nil {
		traceID, parentID = parent.traceID, parent.id
	} else if tid, pid, ok := lambdaParent(ctx); ok {
		traceID, parentID = tid, pid
	} else {
		return ctx, nil
	}
	s := t.newSpan(name, traceID, parentID)
	s.doc.Type = "subsegment"
	return context.WithValue(ctx, spanKey{}, s), s
}

// startSegment opens a segment that continues traceID, or a new trace when
// traceID is empty.
func (t *Tracer) startSegment(ctx context.Context, name, traceID string) (context.Context, *span) {
	if traceID == "" {
		traceID = newTraceID(t.now())
	}
	s := t.newSpan(name, traceID, "")
	return context.WithValue(ctx, spanKey{}, s), s
}

func (t *Tracer) newSpan(name, traceID, parentID string) *span {
	id := newSegmentID()
	return &span{tracer: t, traceID: traceID, id: id, doc: segmentDoc{
		Name: name, ID: id, TraceID: traceID, ParentID: parentID, StartTime: epochSeconds(t.now()),
	}}
}

// downstreamHeader is the X-Amzn-Trace-Id a call made inside s carries, so
// the callee's segment becomes s's child.
func (s *span) downstreamHeader() string {
	return "Root=" + s.traceID + ";Parent=" + s.id + ";Sampled=1"
}

// annotate sets string annotations (X-Ray indexes them for filtering).
// Empty values are skipped; a span that has ended is left alone.
func (s *span) annotate(kv map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end {
		return
	}
	for k, v := range kv {
		if v == "" {
			continue
		}
		if s.doc.Annotations == nil {
			s.doc.Annotations = map[string]string{}
		}
		s.doc.Annotations[k] = v
	}
}

// update runs fn on the document while the span is open.
func (s *span) update(fn func(*segmentDoc)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.end {
		fn(&s.doc)
	}
}

// httpStatus records a response status and the flags X-Ray derives from it.
func (s *span) httpStatus(status int, contentLength int64) {
	s.update(func(d *segmentDoc) {
		if d.HTTP == nil {
			d.HTTP = &httpDoc{}
		}
		d.HTTP.Response = &httpResponseDoc{Status: status, ContentLength: max(contentLength, 0)}
		d.Error, d.Throttle, d.Fault = false, false, false // the last attempt's status counts
		switch {
		case status == 429:
			d.Error, d.Throttle = true, true
		case status >= 400 && status < 500:
			d.Error = true
		case status >= 500:
			d.Fault = true
		}
	})
}

// finish ends the span, recording err as a fault, and sends it. Only the
// first call counts.
func (s *span) finish(err error) {
	s.mu.Lock()
	if s.end {
		s.mu.Unlock()
		return
	}
	s.end = true
	s.doc.EndTime = epochSeconds(s.tracer.now())
	if err != nil {
		s.doc.Fault = true
		msg := err.Error()
		if len(msg) > maxCauseBytes {
			msg = msg[:maxCauseBytes] // one UDP datagram holds the whole document
		}
		s.doc.Cause = &causeDoc{Exceptions: []exceptionDoc{{ID: newSegmentID(), Message: msg}}}
	}
	doc, merr := json.Marshal(s.doc)
	s.mu.Unlock()
	if merr != nil {
		s.tracer.dropped(fmt.Errorf("encode segment %s: %w", s.doc.Name, merr))
		return
	}
	s.tracer.send(doc)
}

// finishOnPanic, deferred around the code a span covers, ends the span as a
// fault when that code panics, then lets the panic go on unchanged.
// Without it the span would never be sent: the trace would lose the very
// request that failed, and the spans already sent under it would name a
// parent X-Ray never receives. before, when not nil, runs first (to record
// the answer the panic will get). A span that ended normally is left alone.
func (s *span) finishOnPanic(before func()) {
	p := recover()
	if p == nil {
		return
	}
	if before != nil {
		before()
	}
	s.finish(fmt.Errorf("panic: %v", p))
	panic(p)
}

// maxCauseBytes bounds the error text on a span, so a document stays far
// below the 64 KiB the daemon reads per datagram.
const maxCauseBytes = 2048

func epochSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// newTraceID is an X-Ray trace id: version 1, the epoch second, 96 random bits.
func newTraceID(now time.Time) string {
	var r [12]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("1-%08x-%s", now.Unix(), hex.EncodeToString(r[:]))
}

// validTraceID reports whether id has X-Ray's trace id form,
// 1-<8 hex digits>-<24 hex digits>.
func validTraceID(id string) bool {
	return len(id) == 35 && id[:2] == "1-" && id[10] == '-' && isHex(id[2:10]) && isHex(id[11:])
}

// validSegmentID reports whether id has X-Ray's segment id form, 16 hex digits.
func validSegmentID(id string) bool { return len(id) == 16 && isHex(id) }

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// newSegmentID is 64 random bits in hex.
func newSegmentID() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}
