package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type markerHandler struct{ called *bool }

func (h markerHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	*h.called = true
	w.WriteHeader(http.StatusTeapot)
}

func newTestTracer(t *testing.T, enabled bool, d *daemon) *Tracer {
	t.Helper()
	cfg := TracerConfig{Enabled: enabled}
	if d != nil {
		cfg.DaemonAddr = d.conn.LocalAddr().(*net.UDPAddr)
	}
	tr, err := NewTracer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestDisabledTracerPassesThrough(t *testing.T) {
	tr := newTestTracer(t, false, nil)
	assert.False(t, tr.Enabled())

	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	ctx = context.WithValue(ctx, LambdaTraceHeaderKey, sampledLambdaHeader) //nolint:staticcheck // aws-lambda-go's key is a string
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

	var cfg aws.Config
	tr.InstrumentAWS(&cfg.APIOptions)
	assert.Empty(t, cfg.APIOptions, "no middleware when disabled")
}

func TestNilTracerPassesThrough(t *testing.T) {
	var tr *Tracer
	assert.False(t, tr.Enabled())
	assert.NoError(t, tr.Segment(context.Background(), "op", func(context.Context) error { return nil }))
	assert.NoError(t, tr.Close())
}

func TestTracerRefusesAnUnparsableDaemonAddress(t *testing.T) {
	t.Setenv("AWS_XRAY_DAEMON_ADDRESS", "not an address")
	_, err := NewTracer(TracerConfig{Enabled: true})
	assert.ErrorContains(t, err, "AWS_XRAY_DAEMON_ADDRESS")
}

// Enabled but outside Lambda and outside any segment, nothing is traced:
// fn runs without a span and the downstream call carries no trace header.
func TestEnabledTracerWithoutSegmentCallsThrough(t *testing.T) {
	tr := newTestTracer(t, true, newDaemon(t))
	ctx := context.Background()
	ran := false
	require.NoError(t, tr.Segment(ctx, "op", func(got context.Context) error {
		ran = true
		assert.Nil(t, spanFrom(got))
		return nil
	}))
	assert.True(t, ran)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get(TraceHeader), "untraced request carries no trace header")
	}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := tr.HTTPClient(srv.Client()).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// A Lambda invocation the service did not sample (Sampled=0) is not
// traced, but its trace id still reaches the logs.
func TestUnsampledLambdaInvocationIsNotTraced(t *testing.T) {
	tr := newTestTracer(t, true, newDaemon(t))
	ctx := context.WithValue(context.Background(), LambdaTraceHeaderKey, //nolint:staticcheck // aws-lambda-go's key is a string
		"Root=1-5759e988-bd862e3fe1be46a994272795;Parent=53995c3f42cd8ad8;Sampled=0")
	require.NoError(t, tr.Segment(ctx, "op", func(got context.Context) error {
		assert.Nil(t, spanFrom(got))
		return nil
	}))
	var inner *span
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { inner = spanFrom(r.Context()) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(ctx))
	assert.Nil(t, inner, "an unsampled invocation opens no segment of its own either")
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272795", TraceID(ctx))
}

// daemon is a stand-in X-Ray daemon: a UDP listener on a random loopback
// port, reading what the tracer really sends.
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

// next returns the next segment document the tracer sent.
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

const sampledLambdaHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func lambdaContext() context.Context {
	// What aws-lambda-go puts in the invocation context.
	return context.WithValue(context.Background(), LambdaTraceHeaderKey, sampledLambdaHeader) //nolint:staticcheck // aws-lambda-go's key is a string
}

func TestEnabledTracerSendsLambdaSubsegmentToDaemon(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)

	want := errors.New("downstream timeout")
	err := tr.Segment(lambdaContext(), "dispatch", func(inner context.Context) error {
		assert.NotNil(t, spanFrom(inner), "fn runs inside the subsegment")
		Annotate(inner, map[string]string{"state": "UNKNOWN", "code": ""})
		return want
	})
	assert.Same(t, want, err)

	doc := d.next(t)
	assert.Equal(t, "dispatch", doc["name"])
	assert.Equal(t, "subsegment", doc["type"])
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272793", doc["trace_id"])
	assert.Equal(t, "53995c3f42cd8ad8", doc["parent_id"], "a child of the function's segment")
	assert.Equal(t, true, doc["fault"], "the error is recorded on the subsegment")
	assert.Equal(t, map[string]any{"state": "UNKNOWN"}, doc["annotations"], "empty values are not annotations")
	assert.Less(t, doc["start_time"].(float64), doc["end_time"].(float64)+1e-9)
	assert.Regexp(t, `^[0-9a-f]{16}$`, doc["id"])
}

func TestEnabledTracerHandlerSendsSegmentOutsideLambda(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)

	var sawSegment bool
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawSegment = spanFrom(r.Context()) != nil
		_ = tr.Segment(r.Context(), "store.insert", func(context.Context) error { return nil })
		w.WriteHeader(http.StatusAccepted)
	}))

	req := httptest.NewRequest(http.MethodPost, "/mcp?token=secret", nil)
	req.Header.Set(TraceHeader, "Root=1-5759e988-bd862e3fe1be46a994272794;Sampled=1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	assert.True(t, sawSegment)
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.Contains(t, rec.Header().Get(TraceHeader), "Root=1-5759e988-bd862e3fe1be46a994272794")

	// Each span is its own document, sent when it ends: the inner one first.
	inner, seg := d.next(t), d.next(t)
	assert.Equal(t, "store.insert", inner["name"])
	assert.Equal(t, "subsegment", inner["type"])
	assert.Equal(t, "intentgate-mcp", seg["name"])
	assert.NotContains(t, seg, "type", "a segment, not a subsegment")
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272794", seg["trace_id"])
	assert.Equal(t, seg["id"], inner["parent_id"], "the inner span is a child of the request's segment")
	assert.Equal(t, seg["trace_id"], inner["trace_id"])
	httpInfo := seg["http"].(map[string]any)
	assert.Equal(t, map[string]any{"method": "POST", "url": "http://example.com/mcp"}, httpInfo["request"], "no query string in a trace")
	assert.InDelta(t, 202.0, httpInfo["response"].(map[string]any)["status"], 0)
}

func TestHandlerOutsideLambdaHonoursAnUnsampledCaller(t *testing.T) {
	tr := newTestTracer(t, true, newDaemon(t))
	var inner *span
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { inner = spanFrom(r.Context()) }))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set(TraceHeader, "Root=1-5759e988-bd862e3fe1be46a994272796;Sampled=0")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Nil(t, inner)
	assert.Empty(t, rec.Header().Get(TraceHeader))
}

func TestEnabledTracerHandlerUnderLambdaTracesRequestAndDownstreamCall(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)

	var downstreamHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstreamHeader = r.Header.Get(TraceHeader)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	client := tr.HTTPClient(srv.Client())
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, srv.URL+"/reviews", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Empty(t, req.Header.Get(TraceHeader), "the caller's request is not modified")
		w.WriteHeader(resp.StatusCode)
	}))

	req := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(lambdaContext())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusCreated, rec.Code)

	call, request := d.next(t), d.next(t)
	assert.Equal(t, "intentgate-mcp", request["name"])
	assert.Equal(t, "subsegment", request["type"], "under Lambda the request is a subsegment of the function's segment")
	assert.Equal(t, "53995c3f42cd8ad8", request["parent_id"])
	assert.Equal(t, "remote", call["namespace"])
	assert.Equal(t, request["id"], call["parent_id"], "the downstream call is a child of the request")
	assert.InDelta(t, 201.0, call["http"].(map[string]any)["response"].(map[string]any)["status"], 0)
	assert.Equal(t, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent="+call["id"].(string)+";Sampled=1", downstreamHeader,
		"the downstream call continues the Lambda's trace under its own subsegment")
}

// An AWS SDK v2 call through the instrumented config becomes a subsegment
// named after the service with operation, region, status and request id,
// and the request on the wire carries the trace header. The loopback
// server answers as DynamoDB does when a table is missing.
func TestInstrumentedAWSCallIsASubsegment(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)

	var wireHeader, target string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wireHeader, target = r.Header.Get(TraceHeader), r.Header.Get("X-Amz-Target")
		w.Header().Set("X-Amzn-RequestId", "REQ123")
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`))
	}))
	t.Cleanup(srv.Close)

	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	tr.InstrumentAWS(&cfg.APIOptions)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })

	var callErr error
	_ = tr.Segment(lambdaContext(), "intentgate-reconciler", func(ctx context.Context) error {
		_, callErr = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("missing"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
		return nil
	})
	require.Error(t, callErr)
	assert.Equal(t, "DynamoDB_20120810.GetItem", target)

	call, outer := d.next(t), d.next(t)
	assert.Equal(t, "DynamoDB", call["name"])
	assert.Equal(t, "aws", call["namespace"])
	assert.Equal(t, outer["id"], call["parent_id"])
	assert.Equal(t, "1-5759e988-bd862e3fe1be46a994272793", call["trace_id"])
	assert.Equal(t, map[string]any{"operation": "GetItem", "region": "eu-west-1", "request_id": "REQ123"}, call["aws"])
	assert.Equal(t, true, call["error"], "a 4xx is an error")
	assert.Equal(t, true, call["fault"], "the call failed")
	assert.InDelta(t, 400.0, call["http"].(map[string]any)["response"].(map[string]any)["status"], 0)
	assert.Equal(t, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent="+call["id"].(string)+";Sampled=1", wireHeader)
}

// Outside a traced invocation (the SSM reads at cold start) an
// instrumented AWS call runs untraced and sends nothing.
func TestInstrumentedAWSCallOutsideATraceIsUntraced(t *testing.T) {
	tr := newTestTracer(t, true, newDaemon(t))
	var wireHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wireHeader = r.Header.Get(TraceHeader)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	tr.InstrumentAWS(&cfg.APIOptions)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
	require.NoError(t, err)
	assert.Empty(t, wireHeader)
}

// A segment that cannot be sent is logged and dropped: the traced call's
// own result is untouched.
func TestASegmentThatCannotBeSentIsLoggedNotFailed(t *testing.T) {
	var log bytes.Buffer
	tr, err := NewTracer(TracerConfig{Enabled: true, DaemonAddr: newDaemon(t).conn.LocalAddr().(*net.UDPAddr),
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	want := errors.New("provider said no")
	assert.Same(t, want, tr.Segment(lambdaContext(), "dispatch", func(context.Context) error { return want }))
	assert.Contains(t, log.String(), "trace segment dropped")
	assert.Contains(t, log.String(), "tracer closed")
}

// With no daemon listening (a local run under the emulator) the spans are
// lost quietly: the kernel's refusals are not warnings.
func TestNoDaemonListeningIsNotAWarning(t *testing.T) {
	gone := newDaemon(t)
	addr := gone.conn.LocalAddr().(*net.UDPAddr)
	require.NoError(t, gone.conn.Close())
	var log bytes.Buffer
	tr, err := NewTracer(TracerConfig{Enabled: true, DaemonAddr: addr, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	for range 5 {
		require.NoError(t, tr.Segment(lambdaContext(), "dispatch", func(context.Context) error { return nil }))
	}
	assert.Empty(t, log.String())
}
