package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// newRequest builds the server-side http.Request for a payload 2.0 event.
// ctx becomes the request's context, so the Lambda deadline reaches handlers.
func newRequest(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("decode base64 body: %w", err)
		}
		body = decoded
	}

	target := requestPath(ev)
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, fmt.Errorf("parse path %q: %w", target, err)
	}
	u.RawQuery = ev.RawQueryString

	method := ev.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	// http.NewRequest builds a client request; make it look like one the
	// net/http server would hand to a handler.
	req.URL = u
	req.RequestURI = u.RequestURI()

	req.Header = make(http.Header, len(ev.Headers)+2)
	for name, value := range ev.Headers {
		// Verbatim: one value, commas and all (see the package comment).
		key := http.CanonicalHeaderKey(name)
		req.Header[key] = append(req.Header[key], value)
	}
	if len(ev.Cookies) > 0 {
		// Payload 2.0 moves the Cookie header into the cookies array.
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}

	// The net/http server keeps Host out of the header map and reports the
	// body length it actually has; do the same.
	req.Host = req.Header.Get("Host")
	req.Header.Del("Host")
	if req.Host == "" {
		req.Host = ev.RequestContext.DomainName
	}
	req.Header.Del("Transfer-Encoding")
	req.ContentLength = int64(len(body))
	if req.Header.Get("Content-Length") != "" {
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}

	if proto := ev.RequestContext.HTTP.Protocol; proto != "" {
		if major, minor, ok := http.ParseHTTPVersion(proto); ok {
			req.Proto, req.ProtoMajor, req.ProtoMinor = proto, major, minor
		}
	}
	if ip := ev.RequestContext.HTTP.SourceIP; ip != "" {
		// API Gateway gives no client port; "0" keeps RemoteAddr parseable
		// by net.SplitHostPort like the net/http server's "ip:port".
		req.RemoteAddr = net.JoinHostPort(ip, "0")
	}
	return req, nil
}

// requestPath returns the path the handler routes on. With a named stage
// (anything but $default) API Gateway puts the stage in rawPath although
// routes never include it, so it is stripped.
func requestPath(ev events.APIGatewayV2HTTPRequest) string {
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	if stage := ev.RequestContext.Stage; stage != "" && stage != "$default" {
		prefix := "/" + stage
		if path == prefix {
			path = "/"
		} else if strings.HasPrefix(path, prefix+"/") {
			path = strings.TrimPrefix(path, prefix)
		}
	}
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	return path
}

// jwtClaims returns the JWT authorizer's claims, or nil when the event has
// none. The map is copied so a handler can not alter the event.
func jwtClaims(ev events.APIGatewayV2HTTPRequest) map[string]string {
	az := ev.RequestContext.Authorizer
	if az == nil || az.JWT == nil || az.JWT.Claims == nil {
		return nil
	}
	claims := make(map[string]string, len(az.JWT.Claims))
	for k, v := range az.JWT.Claims {
		claims[k] = v
	}
	return claims
}
