package lambdahttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/requestid"
)

// echo is what the echo handler saw of the request.
type echo struct {
	Method         string              `json:"method"`
	Path           string              `json:"path"`
	RawQuery       string              `json:"raw_query"`
	RequestURI     string              `json:"request_uri"`
	Host           string              `json:"host"`
	RemoteAddr     string              `json:"remote_addr"`
	Proto          string              `json:"proto"`
	ContentLength  int64               `json:"content_length"`
	Header         map[string][]string `json:"header"`
	Body           string              `json:"body"`
	RequestID      string              `json:"request_id"`
	GatewayID      string              `json:"gateway_request_id"`
	Claims         map[string]string   `json:"claims"`
	HasDeadline    bool                `json:"has_deadline"`
	DeadlineUnixMs int64               `json:"deadline_unix_ms"`
}

type claimsKey struct{}

// captureClaims stands in for auth.WithGatewayClaims.
func captureClaims(ctx context.Context, claims map[string]string) context.Context {
	return context.WithValue(ctx, claimsKey{}, claims)
}

func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		e := echo{
			Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, RequestURI: r.RequestURI,
			Host: r.Host, RemoteAddr: r.RemoteAddr, Proto: r.Proto, ContentLength: r.ContentLength,
			Header: r.Header, Body: string(body),
			RequestID: requestid.From(r.Context()).Request, GatewayID: requestid.From(r.Context()).Gateway,
		}
		e.Claims, _ = r.Context().Value(claimsKey{}).(map[string]string)
		if d, ok := r.Context().Deadline(); ok {
			e.HasDeadline, e.DeadlineUnixMs = true, d.UnixMilli()
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(e); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

func loadEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	require.NoError(t, err)
	var ev events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	return ev
}

// invoke runs the adapter the way the Lambda runtime does: a context with a
// deadline and the invocation's LambdaContext.
func invoke(t *testing.T, h http.Handler, opts Options, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, echo, time.Time) {
	t.Helper()
	deadline := time.Now().Add(25 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "8f5c2a3e-7b1d-4c9e-a6f0-2d4b8e1c3a57"})

	res, err := Handler(h, opts)(ctx, ev)
	require.NoError(t, err)
	var seen echo
	if !res.IsBase64Encoded && strings.HasPrefix(res.Body, `{"method"`) { // the echo handler answered
		require.NoError(t, json.Unmarshal([]byte(res.Body), &seen))
	}
	return res, seen, deadline
}

func TestRecordedEventsReachTheHandlerIntact(t *testing.T) {
	cases := []struct {
		file        string
		method      string
		path        string
		bodyHas     string
		headers     map[string]string // canonical name -> the one value expected
		claimsSub   string
		cookie      string
		gatewayID   string
		contentType string
	}{
		{
			file: "apigw-tools-list.json", method: http.MethodPost, path: "/mcp",
			bodyHas:   `"method":"tools/list"`,
			headers:   map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			claimsSub: "user-8c41e2", gatewayID: "Yx3kQhLmIAMEbXw=",
		},
		{
			file: "apigw-tools-call-risk-review.json", method: http.MethodPost, path: "/mcp",
			bodyHas: `"arguments":{"order_id":"O20260728001","reason":"chargeback pattern","operation_id":"op-sample-0001"}`,
			headers: map[string]string{
				"Mcp-Protocol-Version": "2026-07-28",
				"Mcp-Name":             "request_risk_review",
				"Mcp-Param-Order-Id":   "O20260728001",
				"Accept":               "application/json, text/event-stream",
			},
			claimsSub: "user-8c41e2", gatewayID: "Yx3kSgN2IAMEcQg=",
		},
		{
			file: "apigw-tools-call-duplicate-param-header.json", method: http.MethodPost, path: "/mcp",
			bodyHas: `"order_id":"O20260728001"`,
			// Joined by API Gateway; must stay one value so the server sees the mismatch.
			headers:   map[string]string{"Mcp-Param-Order-Id": "O20260728001, O20260728002"},
			claimsSub: "user-8c41e2", gatewayID: "Yx3kUjP8IAMEdAA=",
		},
		{
			file: "apigw-tools-call-base64-body.json", method: http.MethodPost, path: "/mcp",
			bodyHas:   `"reason":"chargeback pattern — retry"`,
			headers:   map[string]string{"Content-Type": "application/json"},
			claimsSub: "user-8c41e2", gatewayID: "Yx3kWfR4IAMEdLw=",
		},
		{
			file: "apigw-initialize-legacy.json", method: http.MethodPost, path: "/mcp",
			bodyHas:   `"protocolVersion":"2025-06-18"`,
			headers:   map[string]string{"User-Agent": "legacy-agent/0.9.4"},
			claimsSub: "user-8c41e2", gatewayID: "Yx3kYbT1IAMEeHg=",
		},
		{
			file: "apigw-oauth-protected-resource.json", method: http.MethodGet, path: "/.well-known/oauth-protected-resource",
			headers:   map[string]string{"Accept": "application/json"},
			cookie:    "_ga=GA1.2.1043.1785230000; consent=analytics",
			gatewayID: "Yx3kZcV6IAMEetA=",
		},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			ev := loadEvent(t, tc.file)
			res, seen, deadline := invoke(t, echoHandler(), Options{WithGatewayClaims: captureClaims}, ev)

			require.Equal(t, http.StatusOK, res.StatusCode, res.Body)
			assert.False(t, res.IsBase64Encoded, "a JSON answer travels as text")
			assert.Equal(t, tc.method, seen.Method)
			assert.Equal(t, tc.path, seen.Path)
			assert.Equal(t, "k7x2m9p4qa.execute-api.us-east-1.amazonaws.com", seen.Host)
			assert.Empty(t, seen.Header["Host"], "Host lives in r.Host, as with net/http")
			assert.Equal(t, "203.0.113.42:0", seen.RemoteAddr)
			assert.Equal(t, "HTTP/1.1", seen.Proto)
			assert.Contains(t, seen.Body, tc.bodyHas)
			assert.Equal(t, int64(len(seen.Body)), seen.ContentLength)
			for name, want := range tc.headers {
				assert.Equal(t, []string{want}, seen.Header[name], name)
			}
			if tc.cookie != "" {
				assert.Equal(t, []string{tc.cookie}, seen.Header["Cookie"])
			}
			assert.Equal(t, "8f5c2a3e-7b1d-4c9e-a6f0-2d4b8e1c3a57", seen.RequestID)
			assert.Equal(t, tc.gatewayID, seen.GatewayID)
			assert.Equal(t, []string{"8f5c2a3e-7b1d-4c9e-a6f0-2d4b8e1c3a57"}, seen.Header["X-Request-Id"])
			assert.True(t, seen.HasDeadline)
			assert.Equal(t, deadline.UnixMilli(), seen.DeadlineUnixMs, "the Lambda deadline reaches the handler")
			if tc.claimsSub != "" {
				assert.Equal(t, tc.claimsSub, seen.Claims["sub"])
				assert.Equal(t, "support-assistant", seen.Claims["client_id"])
			} else {
				assert.Nil(t, seen.Claims, "no authorizer, no claims callback")
			}
		})
	}
}

func TestCommaJoinedHeaderIsNotSplit(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-call-duplicate-param-header.json")
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("Mcp-Param-Order-Id")
	})
	_, _, _ = invoke(t, h, Options{}, ev)
	assert.Equal(t, []string{"O20260728001, O20260728002"}, got,
		"a first-value reader must not see a value that matches the body")
}

func TestClaimsCallbackSkippedWithoutAuthorizer(t *testing.T) {
	ev := loadEvent(t, "apigw-oauth-protected-resource.json")
	called := false
	opts := Options{WithGatewayClaims: func(ctx context.Context, _ map[string]string) context.Context {
		called = true
		return ctx
	}}
	_, _, _ = invoke(t, echoHandler(), opts, ev)
	assert.False(t, called)
}

func TestHandlerCannotAlterEventClaims(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-list.json")
	opts := Options{WithGatewayClaims: func(ctx context.Context, claims map[string]string) context.Context {
		claims["sub"] = "someone-else"
		return ctx
	}}
	_, _, _ = invoke(t, echoHandler(), opts, ev)
	assert.Equal(t, "user-8c41e2", ev.RequestContext.Authorizer.JWT.Claims["sub"])
}

func TestCallerRequestIDHeaderKeptButNotTrusted(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-list.json")
	ev.Headers["x-request-id"] = "caller-chosen"
	_, seen, _ := invoke(t, echoHandler(), Options{}, ev)
	assert.Equal(t, []string{"caller-chosen"}, seen.Header["X-Request-Id"])
	assert.Equal(t, "8f5c2a3e-7b1d-4c9e-a6f0-2d4b8e1c3a57", seen.RequestID)
}

func TestRequestIDFallsBackToGatewayID(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-list.json")
	res, err := Handler(echoHandler(), Options{})(context.Background(), ev)
	require.NoError(t, err)
	var seen echo
	require.NoError(t, json.Unmarshal([]byte(res.Body), &seen))
	assert.Equal(t, "Yx3kQhLmIAMEbXw=", seen.RequestID)
	assert.False(t, seen.HasDeadline)

	ev.RequestContext.RequestID = ""
	res, err = Handler(echoHandler(), Options{})(context.Background(), ev)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(res.Body), &seen))
	assert.Len(t, seen.RequestID, 36, "a minted uuid when no id exists")
}

func TestQueryAndEscapedPathPreserved(t *testing.T) {
	ev := loadEvent(t, "apigw-oauth-protected-resource.json")
	ev.RawPath = "/.well-known/oauth-protected-resource/mcp%2Fv1"
	ev.RawQueryString = "a=1&a=2&b=x%2Cy"
	_, seen, _ := invoke(t, echoHandler(), Options{}, ev)
	assert.Equal(t, "/.well-known/oauth-protected-resource/mcp/v1", seen.Path)
	assert.Equal(t, "a=1&a=2&b=x%2Cy", seen.RawQuery)
	assert.Equal(t, "/.well-known/oauth-protected-resource/mcp%2Fv1?a=1&a=2&b=x%2Cy", seen.RequestURI)
}

func TestNamedStagePrefixStripped(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-list.json")
	ev.RequestContext.Stage = "prod"
	ev.RawPath = "/prod/mcp"
	_, seen, _ := invoke(t, echoHandler(), Options{}, ev)
	assert.Equal(t, "/mcp", seen.Path)

	ev.RawPath = "/production/mcp" // not the stage segment: left alone
	_, seen, _ = invoke(t, echoHandler(), Options{}, ev)
	assert.Equal(t, "/production/mcp", seen.Path)
}

func TestIPv6SourceStaysParseable(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-list.json")
	ev.RequestContext.HTTP.SourceIP = "2001:db8::7"
	_, seen, _ := invoke(t, echoHandler(), Options{}, ev)
	host, _, err := net.SplitHostPort(seen.RemoteAddr)
	require.NoError(t, err)
	assert.Equal(t, "2001:db8::7", host)
}

func TestMalformedBase64BodyIsBadRequest(t *testing.T) {
	ev := loadEvent(t, "apigw-tools-call-base64-body.json")
	ev.Body = "not base64!"
	called := false
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
	res, _, _ := invoke(t, h, Options{Logger: discardLogger()}, ev)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.False(t, called, "nothing reaches the handler")
}

func TestResponseMapping(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	cases := []struct {
		name        string
		handler     http.HandlerFunc
		status      int
		headers     map[string]string
		cookies     []string
		body        string
		base64      bool
		contentType string
	}{
		{
			name: "json text with repeated headers and cookies",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Add("Vary", "Accept")
				w.Header().Add("Vary", "Mcp-Protocol-Version")
				w.Header().Add("Set-Cookie", "a=1; Path=/; Expires=Wed, 29 Jul 2026 10:31:08 GMT")
				w.Header().Add("Set-Cookie", "b=2; HttpOnly")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"ok":true}`))
			},
			status:  http.StatusAccepted,
			headers: map[string]string{"Content-Type": "application/json", "Vary": "Accept, Mcp-Protocol-Version"},
			cookies: []string{"a=1; Path=/; Expires=Wed, 29 Jul 2026 10:31:08 GMT", "b=2; HttpOnly"},
			body:    `{"ok":true}`,
		},
		{
			name: "401 with WWW-Authenticate verbatim",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error="invalid_token"`)
				w.WriteHeader(http.StatusUnauthorized)
			},
			status:  http.StatusUnauthorized,
			headers: map[string]string{"Www-Authenticate": `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error="invalid_token"`},
		},
		{
			name: "no explicit status, sniffed content type",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("plain words"))
			},
			status:  http.StatusOK,
			headers: map[string]string{"Content-Type": "text/plain; charset=utf-8"},
			body:    "plain words",
		},
		{
			name: "binary content type",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write(png)
			},
			status: http.StatusOK, body: base64.StdEncoding.EncodeToString(png), base64: true,
		},
		{
			name: "octet-stream that happens to be ASCII",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write([]byte("abc"))
			},
			status: http.StatusOK, body: base64.StdEncoding.EncodeToString([]byte("abc")), base64: true,
		},
		{
			name: "invalid UTF-8 under a text type",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte{0xff, 0xfe, 'x'})
			},
			status: http.StatusOK, body: base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 'x'}), base64: true,
		},
		{
			name: "gzip-encoded json",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = w.Write([]byte("\x1f\x8b"))
			},
			status: http.StatusOK, body: base64.StdEncoding.EncodeToString([]byte("\x1f\x8b")), base64: true,
			headers: map[string]string{"Content-Encoding": "gzip"},
		},
		{
			name: "problem+json is text",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"title":"overloaded"}`))
			},
			status: http.StatusTooManyRequests, body: `{"title":"overloaded"}`,
		},
		{
			name: "headers changed after WriteHeader are not sent",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				w.Header().Set("X-Late", "1")
				_, _ = w.Write([]byte(`{}`))
			},
			status: http.StatusOK, body: `{}`, headers: map[string]string{"X-Late": ""},
		},
		{
			name: "204 carries no body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNoContent)
				_, _ = w.Write([]byte("ignored"))
			},
			status: http.StatusNoContent,
		},
		{
			name: "panic becomes 500 without the partial response",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Partial", "1")
				_, _ = w.Write([]byte("half"))
				panic("boom")
			},
			status:  http.StatusInternalServerError,
			headers: map[string]string{"X-Partial": "", "Content-Type": "text/plain; charset=utf-8"},
			body:    "Internal Server Error\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := loadEvent(t, "apigw-tools-list.json")
			opts := Options{Logger: discardLogger()}
			res, _, _ := invoke(t, tc.handler, opts, ev)
			assert.Equal(t, tc.status, res.StatusCode)
			for name, want := range tc.headers {
				assert.Equal(t, want, res.Headers[name], name)
			}
			if tc.cookies == nil {
				tc.cookies = []string{}
			}
			assert.Equal(t, tc.cookies, res.Cookies)
			assert.NotContains(t, res.Headers, "Set-Cookie")
			assert.Equal(t, tc.body, res.Body)
			assert.Equal(t, tc.base64, res.IsBase64Encoded)
		})
	}
}

func TestHeadResponseHasNoBody(t *testing.T) {
	ev := loadEvent(t, "apigw-oauth-protected-resource.json")
	ev.RequestContext.HTTP.Method = http.MethodHead
	res, _, _ := invoke(t, echoHandler(), Options{}, ev)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Empty(t, res.Body)
}
