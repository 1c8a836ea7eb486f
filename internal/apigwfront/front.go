// Package apigwfront is a small local stand-in for API Gateway's HTTP API
// in front of a Lambda function running under the Lambda Runtime Interface
// Emulator: each HTTP request becomes a payload format 2.0 event, is
// invoked through the emulator's invoke endpoint, and the function's
// response is written back as HTTP, the way API Gateway does it.
//
// It lets an HTTP client (an MCP client, the MCP conformance suite) talk to
// the real Lambda binary through the real Lambda adapter. It is for local
// tests only: no authorizer, no throttling, one stage ($default).
package apigwfront

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// MaxBodyBytes is API Gateway's payload limit for HTTP APIs (10 MB).
const MaxBodyBytes = 10 << 20

// Front turns HTTP requests into invocations of one function.
type Front struct {
	invokeURL string
	route     string
	// hosts are the host names the API answers to; empty means any.
	hosts  map[string]bool
	client *http.Client
	next   atomic.Uint64 // request id counter
	now    func() time.Time
	// slot admits one invocation at a time: an emulator is one execution
	// environment, which Lambda never gives two invocations at once (the
	// emulator crashes on a second). Where Lambda would start another
	// environment, the front makes the request wait.
	slot chan struct{}
}

// New returns a front invoking the function at invokeURL (the emulator's
// "/2015-03-31/functions/function/invocations"). route is the routeKey the
// events carry, e.g. "$default"; empty means "METHOD /path" of each request
// (every request is passed on: there is no route table to answer 404).
//
// hosts are the API's domain names (without port). API Gateway answers a
// request for a host it does not serve with 403 before any invocation; the
// front does the same when hosts are given, so a DNS-rebinding request
// (Host: attacker.example) never reaches the function.
func New(invokeURL, route string, hosts ...string) *Front {
	f := &Front{invokeURL: invokeURL, route: route, client: &http.Client{}, now: time.Now, slot: make(chan struct{}, 1)}
	if len(hosts) > 0 {
		f.hosts = make(map[string]bool, len(hosts))
		for _, h := range hosts {
			f.hosts[strings.ToLower(h)] = true
		}
	}
	return f
}

// ServeHTTP invokes the function with the request's event and writes its
// response. A function that cannot be invoked or answers with something
// that is not a payload 2.0 response is a 502, as at API Gateway.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hosts != nil {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !f.hosts[strings.ToLower(host)] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"Forbidden"}`)
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxBodyBytes {
		http.Error(w, `{"message":"Request Entity Too Large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	id := fmt.Sprintf("front-%d", f.next.Add(1))
	route := f.route
	if route == "" {
		route = r.Method + " " + r.URL.Path
	}
	ev := Event(r, body, route, id, f.now())
	resp, err := f.invoke(r.Context(), ev)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, `{"message":"Internal Server Error","cause":%q}`, err.Error())
		return
	}
	if err := WriteResponse(w, resp); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

func (f *Front) invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var out events.APIGatewayV2HTTPResponse
	select {
	case f.slot <- struct{}{}:
		defer func() { <-f.slot }()
	case <-ctx.Done():
		return out, fmt.Errorf("waiting for the function: %w", ctx.Err())
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return out, fmt.Errorf("encoding event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.invokeURL, bytes.NewReader(payload))
	if err != nil {
		return out, fmt.Errorf("invoke request: %w", err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return out, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, fmt.Errorf("reading invoke response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		return out, fmt.Errorf("invoke: status %d: %s", resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("function response is not a payload 2.0 response: %w", err)
	}
	if out.StatusCode == 0 {
		return out, fmt.Errorf("function response has no statusCode: %s", data)
	}
	return out, nil
}

// Event is the payload 2.0 event API Gateway sends for r: header names in
// lower case with repeated values joined by commas, cookies apart, the body
// base64-encoded unless it is UTF-8 text.
func Event(r *http.Request, body []byte, route, requestID string, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header)+1)
	var cookies []string
	for name, values := range r.Header {
		key := strings.ToLower(name)
		if key == "cookie" {
			for _, v := range values {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[key] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	if len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       route,
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Cookies:        cookies,
		Headers:        headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   route,
			Stage:      "$default",
			RequestID:  requestID,
			DomainName: r.Host,
			Time:       now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// WriteResponse writes a payload 2.0 response as API Gateway does: headers
// (multi-value ones too), cookies as Set-Cookie, the body decoded when it
// is base64.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) error {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return fmt.Errorf("function response body is not base64: %w", err)
		}
		body = decoded
	}
	h := w.Header()
	for name, value := range resp.Headers {
		h.Set(name, value)
	}
	for name, values := range resp.MultiValueHeaders {
		h.Del(name)
		for _, v := range values {
			h.Add(name, v)
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, err := w.Write(body)
	return err
}
