package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-xray-sdk-go/strategy/sampling"
	"github.com/aws/aws-xray-sdk-go/xray"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type markerHandler struct{ called *bool }

func (h markerHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	*h.called = true
	w.WriteHeader(http.StatusTeapot)
}

func TestDisabledTracerPassesThrough(t *testing.T) {
	tr := NewTracer(false)
	assert.False(t, tr.Enabled())

	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	want := errors.New("boom")
	err := tr.Segment(ctx, "op", func(got context.Context) error {
		assert.Equal(t, ctx, got, "fn gets the caller's context unchanged")
		return want
	})
	assert.Same(t, want, err)

	c := &http.Client{Timeout: time.Second}
	assert.Same(t, c, tr.HTTPClient(c))
	assert.Same(t, http.DefaultClient, tr.HTTPClient(nil))

	var called bool
	h := markerHandler{called: &called}
	assert.Equal(t, http.Handler(h), tr.Handler("mcp", h))
}

func TestNilTracerPassesThrough(t *testing.T) {
	var tr *Tracer
	assert.False(t, tr.Enabled())
	assert.NoError(t, tr.Segment(context.Background(), "op", func(context.Context) error { return nil }))
}

// Enabled but outside Lambda and outside any segment, nothing is traced and
// the SDK is never asked to (it would only log "segment cannot be found").
func TestEnabledTracerWithoutSegmentCallsThrough(t *testing.T) {
	tr := NewTracer(true)
	ctx := context.Background()
	ran := false
	require.NoError(t, tr.Segment(ctx, "op", func(got context.Context) error {
		ran = true
		assert.Nil(t, xray.GetSegment(got))
		return nil
	}))
	assert.True(t, ran)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get(xray.TraceIDHeaderKey), "untraced request carries no trace header")
	}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := tr.HTTPClient(srv.Client()).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// daemon is a fake X-Ray daemon: a UDP listener on a random loopback port.
type daemon struct {
	conn *net.UDPConn
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &daemon{conn: conn}
}

// next returns the next segment document the SDK sent.
func (d *daemon) next(t *testing.T) map[string]any {
	t.Helper()
	buf := make([]byte, 64*1024)
	// A safety net so a missing packet fails the test instead of hanging it.
	require.NoError(t, d.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, _, err := d.conn.ReadFromUDP(buf)
	require.NoError(t, err)
	header, body, found := bytes.Cut(buf[:n], []byte("\n"))
	require.True(t, found)
	assert.JSONEq(t, `{"format":"json","version":1}`, string(header))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	return doc
}

// tracedContext scopes the SDK to this test through a per-context recorder
// (xray.ContextWithConfig): its emitter sends to the fake daemon. The SDK's
// global configuration (xray.Configure) is left untouched, so no other test
// is affected and nothing is sent to 127.0.0.1:2000.
func tracedContext(t *testing.T, d *daemon) context.Context {
	t.Helper()
	emitter, err := xray.NewDefaultEmitter(d.conn.LocalAddr().(*net.UDPAddr))
	require.NoError(t, err)
	ss, err := sampling.NewLocalizedStrategy()
	require.NoError(t, err)
	ctx, err := xray.ContextWithConfig(context.Background(), xray.Config{
		DaemonAddr:       d.conn.LocalAddr().String(),
		Emitter:          emitter,
		SamplingStrategy: ss,
	})
	require.NoError(t, err)
	return ctx
}

const sampledLambdaHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func TestEnabledTracerSendsLambdaSubsegmentToDaemon(t *testing.T) {
	if xray.SdkDisabled() {
		t.Skip("AWS_XRAY_SDK_DISABLED is set")
	}
	d := newDaemon(t)
	// What the Lambda runtime puts in the invocation context.
	ctx := context.WithValue(tracedContext(t, d), xray.LambdaTraceHeaderKey, sampledLambdaHeader) //nolint:staticcheck // the SDK's own key type

	tr := NewTracer(true)
	want := errors.New("downstream timeout")
	err := tr.Segment(ctx, "dispatch", func(inner context.Context) error {
		assert.NotNil(t, xray.GetSegment(inner), "fn runs inside the subsegment")
		return want
	})
	assert.Same(t, want, err)

	doc := d.next(t)
	assert.Equal(t, "dispatch", doc["name"])
	assert.Equal(t, "subsegment", doc["type"])
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272793", doc["trace_id"])
	assert.Equal(t, "53995c3f42cd8ad8", doc["parent_id"])
	assert.Equal(t, true, doc["fault"], "the error is recorded on the subsegment")
}

func TestEnabledTracerHandlerSendsSegmentOutsideLambda(t *testing.T) {
	if xray.SdkDisabled() {
		t.Skip("AWS_XRAY_SDK_DISABLED is set")
	}
	d := newDaemon(t)
	ctx := tracedContext(t, d)

	tr := NewTracer(true)
	var sawSegment bool
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawSegment = xray.GetSegment(r.Context()) != nil
		_ = tr.Segment(r.Context(), "store.insert", func(context.Context) error { return nil })
		w.WriteHeader(http.StatusAccepted)
	}))

	req := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(ctx)
	req.Header.Set(xray.TraceIDHeaderKey, "Root=1-5759e988-bd862e3fe1be46a994272794;Sampled=1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	assert.True(t, sawSegment)
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Contains(t, rec.Header().Get(xray.TraceIDHeaderKey), "Root=1-5759e988-bd862e3fe1be46a994272794")

	doc := d.next(t)
	assert.Equal(t, "intentgate-mcp", doc["name"])
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272794", doc["trace_id"])
	subs, ok := doc["subsegments"].([]any)
	require.True(t, ok, "the inner span is nested in the segment: %v", doc)
	require.Len(t, subs, 1)
	assert.Equal(t, "store.insert", subs[0].(map[string]any)["name"])
}

func TestEnabledTracerHandlerUnderLambdaTracesRequestAndDownstreamCall(t *testing.T) {
	if xray.SdkDisabled() {
		t.Skip("AWS_XRAY_SDK_DISABLED is set")
	}
	d := newDaemon(t)
	ctx := context.WithValue(tracedContext(t, d), xray.LambdaTraceHeaderKey, sampledLambdaHeader) //nolint:staticcheck // the SDK's own key type

	var downstreamHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstreamHeader = r.Header.Get(xray.TraceIDHeaderKey)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	tr := NewTracer(true)
	client := tr.HTTPClient(srv.Client())
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, srv.URL+"/reviews", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		w.WriteHeader(resp.StatusCode)
	}))

	req := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Contains(t, downstreamHeader, "Root=1-5759e988-bd862e3fe1be46a994272793",
		"the downstream call continues the Lambda's trace")

	doc := d.next(t)
	assert.Equal(t, "intentgate-mcp", doc["name"])
	assert.Equal(t, "subsegment", doc["type"], "under Lambda the request is a subsegment of the function's segment")
	subs, ok := doc["subsegments"].([]any)
	require.True(t, ok, "the downstream call is nested: %v", doc)
	require.Len(t, subs, 1)
	sub := subs[0].(map[string]any)
	assert.Equal(t, "remote", sub["namespace"])
	httpInfo, ok := sub["http"].(map[string]any)
	require.True(t, ok)
	assert.InDelta(t, 201.0, httpInfo["response"].(map[string]any)["status"], 0)
}
