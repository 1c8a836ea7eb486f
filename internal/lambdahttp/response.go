package lambdahttp

import (
	"bytes"
	"encoding/base64"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// responseWriter buffers the whole response: API Gateway takes one payload,
// so streaming (SSE) is not possible behind it and Flush is a no-op.
type responseWriter struct {
	header http.Header
	sent   http.Header // snapshot taken at WriteHeader, like net/http
	status int         // 0 until WriteHeader
	body   bytes.Buffer
}

func newResponseWriter() *responseWriter {
	return &responseWriter{header: make(http.Header)}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 || (code >= 100 && code < 200) {
		return // repeated or informational: net/http ignores or sends them ahead
	}
	w.status = code
	w.sent = w.header.Clone()
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.body.Write(p)
}

// Flush satisfies http.Flusher for handlers that insist on one; the response
// still leaves only when the handler returns.
func (w *responseWriter) Flush() {}

// reset discards everything written so far (used after a handler panic).
func (w *responseWriter) reset() {
	w.header = make(http.Header)
	w.sent = nil
	w.status = 0
	w.body.Reset()
}

// toEvent converts the buffered response to API Gateway's payload 2.0 shape.
func (w *responseWriter) toEvent(method string) events.APIGatewayV2HTTPResponse {
	status, hdr := w.status, w.sent
	if status == 0 {
		status, hdr = http.StatusOK, w.header.Clone()
	}
	body := w.body.Bytes()
	if !bodyAllowed(status, method) {
		body = nil
	}
	if _, set := hdr["Content-Type"]; !set && len(body) > 0 && hdr.Get("Content-Encoding") == "" {
		hdr.Set("Content-Type", http.DetectContentType(body)) // as net/http does
	}

	res := events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    make(map[string]string, len(hdr)),
		Cookies:    []string{},
	}
	for name, values := range hdr {
		switch {
		case len(values) == 0:
			continue
		case name == "Set-Cookie":
			// Payload 2.0 carries cookies apart; joining them with commas
			// would corrupt Expires dates.
			res.Cookies = append(res.Cookies, values...)
		default:
			res.Headers[name] = strings.Join(values, ", ")
		}
	}
	if len(body) == 0 {
		return res
	}
	if isBinary(hdr, body) {
		res.Body = base64.StdEncoding.EncodeToString(body)
		res.IsBase64Encoded = true
	} else {
		res.Body = string(body)
	}
	return res
}

func bodyAllowed(status int, method string) bool {
	return method != http.MethodHead && status != http.StatusNoContent && status != http.StatusNotModified
}

// isBinary reports whether a body must travel base64-encoded: it is encoded
// (gzip...), not valid UTF-8, or declared with a non-text content type.
func isBinary(hdr http.Header, body []byte) bool {
	if ce := hdr.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return true
	}
	if !utf8.Valid(body) {
		return true
	}
	ct := hdr.Get("Content-Type")
	return ct != "" && !isTextContentType(ct)
}

func isTextContentType(ct string) bool {
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return true // unparseable: the body is valid UTF-8, send it as text
	}
	if _, ok := params["charset"]; ok {
		return true
	}
	if strings.HasPrefix(mediaType, "text/") ||
		strings.HasSuffix(mediaType, "+json") ||
		strings.HasSuffix(mediaType, "+xml") ||
		strings.HasSuffix(mediaType, "+yaml") {
		return true
	}
	switch mediaType {
	case "application/json", "application/xml", "application/javascript",
		"application/x-www-form-urlencoded", "application/yaml", "application/x-yaml",
		"application/x-ndjson", "application/graphql":
		return true
	}
	return false
}
