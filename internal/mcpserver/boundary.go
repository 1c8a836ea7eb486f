package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/requestid"
)

// Header names this package reads or writes.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
)

type requestInfoKey struct{}

// requestInfo is what the boundary learns from the HTTP request before the
// SDK sees it.
type requestInfo struct {
	jsonrpcID   string          // "" for notifications, batches and unparsable bodies
	params      json.RawMessage // nil for batches
	header      http.Header
	deadline    time.Time
	hasDeadline bool
}

// RequestParams returns the params of the JSON-RPC request being served as
// they arrived (within MaxBodyBytes), or nil outside one. Extensions read
// fields the SDK drops when it decodes them (a 2025-11-25 tools/call's
// "task").
func RequestParams(ctx context.Context) json.RawMessage {
	if info := requestInfoFrom(ctx); info != nil {
		return info.params
	}
	return nil
}

// ParamsMember returns the member name of a JSON object (a request's
// params, or an object inside them) by its exact name, and whether it is
// there. encoding/json matches struct fields case-insensitively, but the
// SDK decodes params case-sensitively: a member it does not see ("_META",
// "Task", "NAME") must not decide anything here either. Of duplicate
// members the last counts, as for the SDK.
func ParamsMember(object json.RawMessage, name string) (json.RawMessage, bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(object, &members) != nil {
		return nil, false
	}
	v, ok := members[name]
	return v, ok
}

// ProtocolVersionMeta is the protocol version a request's params name in
// their _meta (2026-07-28 requests carry one), read by exact member names;
// ok is false when they name none. A value that is not a non-empty string
// names none, as the SDK reads it (the request stays at its session's
// revision): otherwise our reading and the SDK's would disagree.
func ProtocolVersionMeta(params json.RawMessage) (version string, ok bool) {
	meta, ok := ParamsMember(params, "_meta")
	if !ok {
		return "", false
	}
	raw, ok := ParamsMember(meta, mcp.MetaKeyProtocolVersion)
	if !ok {
		return "", false
	}
	if json.Unmarshal(raw, &version) != nil || version == "" {
		return "", false
	}
	return version, true
}

func requestInfoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// boundary wraps the SDK's streamable handler. It
//   - keeps the request id the front set (internal/requestid), or mints
//     one, and returns it as X-Request-Id,
//   - records the JSON-RPC id and the request deadline (the SDK hides the
//     HTTP request's deadline from tool handlers),
//   - refuses a body over maxBody after reading at most that much, and one
//     that is not valid UTF-8 (raw bytes or unpaired surrogate escapes),
//     before any JSON is decoded: decoders would silently replace them
//     with U+FFFD, and the request we validate must be the one we store,
//   - answers unparsable bodies with JSON-RPC parse / invalid-request errors,
//   - answers a tools/call of an unknown tool itself, naming the tool only
//     in a shortened form (the SDK echoes the name at full length),
//   - refuses a JSON-RPC batch whole unless it is at protocol 2025-03-26,
//     holds at most maxBatchEntries entries, each entry passes the checks
//     a single message gets, and under an Idempotency-Key header at most
//     one entry calls a tool that takes it (checkBatch),
//   - turns the SDK's plain-text 4xx answers to POSTs into JSON-RPC errors,
//     and shortens the messages of every 4xx error answer (the SDK quotes
//     method names and Mcp-Name headers whole).
type boundary struct {
	next    http.Handler
	maxBody int64
	tools   map[string]bool // registered tool names
	// keyed names the tools that take the Idempotency-Key header as their
	// key (Tool.TakesIdempotencyKey).
	keyed map[string]bool
	// named maps an extension's method to the params field its Mcp-Name
	// header mirrors (Extension.NameParams).
	named map[string]string
	// refuseCalls are the extensions' checks of a tools/call
	// (Extension.RefuseCall).
	refuseCalls []func(revision string, params json.RawMessage) *jsonrpc.Error
}

// maxEchoedToolName bounds how much of an unknown tool name is echoed.
const maxEchoedToolName = 64

// CheckOrigin says whether o is a web origin (http or https, a host, an
// optional port, nothing else) that may be trusted.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") {
		return fmt.Errorf("%q is not a web origin (scheme://host[:port], http or https)", o)
	}
	return nil
}

// RefuseCrossOrigin answers HTTP 403, with a JSON-RPC error that has no
// id, a request whose Origin (or Sec-Fetch-Site) says a browser sent it
// from another origin than this server's own, before next sees it. Every
// Streamable HTTP revision says "Servers MUST validate the Origin header on
// all incoming connections to prevent DNS rebinding attacks" and (from
// 2025-11-25) "If the Origin header is present and invalid, servers MUST
// respond with HTTP 403 Forbidden"; the SDK checks only the Host of a
// loopback listener. A request without Origin (every non-browser client)
// passes, and no browser client can call this server cross-origin anyway:
// it answers no CORS preflight. Put it outside authentication, so such a
// request is refused as forbidden, not as unauthenticated.
func RefuseCrossOrigin(trusted []string, next http.Handler) (http.Handler, error) {
	guard := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := CheckOrigin(o); err != nil {
			return nil, err
		}
		if err := guard.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every method: the guard lets GET, HEAD and OPTIONS through (safe
		// for a web page, not for this endpoint), and the specification
		// asks for the check on all connections. Judged as a POST.
		checked := *r
		checked.Method = http.MethodPost
		if err := guard.Check(&checked); err != nil {
			writeRPCError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"Forbidden: the request's Origin is not this server's")
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

func (b *boundary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// Always server-minted: a caller's X-Request-Id is not unique and must
	// not key audit records.
	ctx, ids := requestid.Ensure(ctx)
	w.Header().Set(requestid.Header, ids.Request)

	info := &requestInfo{header: r.Header}
	info.deadline, info.hasDeadline = ctx.Deadline()
	ctx = context.WithValue(ctx, requestInfoKey{}, info)
	r = r.WithContext(ctx)

	if r.Method != http.MethodPost || !isJSON(r.Header.Get("Content-Type")) {
		b.next.ServeHTTP(w, r) // the SDK answers 405 / 415 itself
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request body exceeds %d bytes", tooLarge.Limit))
			return
		}
		writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "failed to read request body")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	if !utf8.Valid(body) {
		writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: body is not valid UTF-8")
		return
	}
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: body is not valid JSON")
		return
	}
	if hasUnpairedSurrogate(trimmed) {
		writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError,
			"parse error: body is not valid UTF-8 (a \\u escape is an unpaired surrogate)")
		return
	}
	var id jsonrpc.ID
	switch {
	case !supportedVersion(r.Header.Get("MCP-Protocol-Version")):
		// "If the server receives a request with an invalid or unsupported
		// MCP-Protocol-Version, it MUST respond with 400 Bad Request"
		// (2025-06-18 on; 2026-07-28 adds the supported versions): the
		// SDK's answer, never one of ours about the body.
	case len(trimmed) > 0 && trimmed[0] == '[':
		if refused := b.checkBatch(r.Header, trimmed); refused != nil {
			refused.write(w)
			return
		}
	default:
		req, refused := b.checkMessage(r.Header, trimmed)
		if refused != nil {
			refused.write(w)
			return
		}
		if req != nil {
			id = req.ID
			info.jsonrpcID = fmt.Sprint(req.ID.Raw())
			info.params = req.Params
		}
	}

	if r.Header.Get("MCP-Protocol-Version") >= newProtocol {
		// 2026-07-28, Backward Compatibility: "A Last-Event-ID header:
		// ignore it; streams are not resumable." The SDK refuses a POST
		// carrying one (HTTP 400), as earlier revisions resumed only by GET.
		r.Header.Del("Last-Event-ID")
	}
	rw := &rpcErrorWriter{ResponseWriter: w}
	b.next.ServeHTTP(rw, r)
	rw.finish(id)
}

// supportedVersion reports whether the SDK serves protocol version v, an
// MCP-Protocol-Version header value ("" means the header is absent, which
// is 2025-03-26).
func supportedVersion(v string) bool {
	return v == "" || slices.Contains(mcp.SupportedProtocolVersions(), v)
}

// refusal is an answer the boundary gives in place of the SDK's.
type refusal struct {
	status  int
	id      jsonrpc.ID
	code    int64
	message string
}

func (f *refusal) write(w http.ResponseWriter) {
	writeRPCError(w, f.status, f.id, f.code, f.message)
}

// checkMessage applies the boundary's checks to one JSON-RPC message: it
// returns the message if it is a request with an id (nil for
// notifications and responses, which are left to the SDK), or the answer
// that refuses it.
func (b *boundary) checkMessage(header http.Header, data []byte) (*jsonrpc.Request, *refusal) {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		// The decoder quotes a bad "jsonrpc" tag whole.
		return nil, &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			shortenMessage("invalid JSON-RPC message: " + err.Error())}
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.ID.IsValid() {
		return nil, nil
	}
	if raw, _ := ParamsMember(data, "id"); !integralOrString(raw) {
		// "MUST be a string or integer": the SDK truncates 2.5 to 2, so the
		// call would run and its answer name a request the client never sent.
		return nil, &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			shortenMessage("invalid request: id must be a string or an integer of at most 2^53 - 1 in magnitude, not " + string(raw))}
	}
	if name, unknown := b.unknownTool(req); unknown {
		return req, &refusal{invalidParamsStatus(header, req), req.ID, jsonrpc.CodeInvalidParams, "unknown tool " + name}
	}
	if refused := b.checkNameHeader(header, req); refused != nil {
		return req, refused
	}
	if req.Method == "tools/call" {
		for _, refuse := range b.refuseCalls {
			if e := refuse(requestRevision(header, req), req.Params); e != nil {
				return req, &refusal{invalidParamsStatus(header, req), req.ID, e.Code, e.Message}
			}
		}
	}
	return req, nil
}

// maxExactID is the largest integer id the SDK answers with unchanged: it
// reads ids as float64 (2^53 - 1, JavaScript's largest safe integer).
const maxExactID = 1<<53 - 1

// integralOrString reports whether raw, a request's id token, is a string
// or an integer the SDK echoes exactly (2 and 2.0 are one id;
// 9007199254740993 would be answered as ...992).
func integralOrString(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] == '"' {
		return true
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return -maxExactID <= n && n <= maxExactID
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == math.Trunc(f) && math.Abs(f) <= maxExactID
}

// requestRevision is the protocol revision a request names: its _meta's
// (2026-07-28 on), else the MCP-Protocol-Version header's.
func requestRevision(header http.Header, req *jsonrpc.Request) string {
	if v, ok := ProtocolVersionMeta(req.Params); ok && v != "" {
		return v
	}
	return header.Get("MCP-Protocol-Version")
}

// checkNameHeader holds an extension's method to the rule the SDK applies
// to tools/call (2026-07-28, Streamable HTTP, Server Validation): servers
// "MUST reject requests where the values specified in the headers do not
// match the corresponding values in the request body", a missing required
// header included, with HTTP 400 and -32020 HeaderMismatch. The Tasks
// extension makes Mcp-Name required for tasks/get, tasks/update and
// tasks/cancel ("MUST set the Mcp-Name header to the value of
// params.taskId") so that intermediaries may route and throttle on it; a
// request whose header names another task than its body must not be
// served. The version is the header's, as for the SDK's own checks.
func (b *boundary) checkNameHeader(header http.Header, req *jsonrpc.Request) *refusal {
	param, ok := b.named[req.Method]
	if !ok || header.Get("MCP-Protocol-Version") < newProtocol {
		return nil
	}
	mismatch := func(msg string) *refusal {
		return &refusal{http.StatusBadRequest, req.ID, mcp.CodeHeaderMismatch, shortenMessage(msg)}
	}
	inHeader := header.Get("Mcp-Name")
	if inHeader == "" {
		return mismatch(fmt.Sprintf("missing required Mcp-Name header for method %q", req.Method))
	}
	decoded, ok := decodeHeaderValue(inHeader)
	if !ok {
		return mismatch("header mismatch: Mcp-Name header contains invalid Base64 encoding")
	}
	var params map[string]json.RawMessage
	var inBody string
	if json.Unmarshal(req.Params, &params) != nil || json.Unmarshal(params[param], &inBody) != nil {
		return nil // malformed params are the method's to refuse (-32602)
	}
	if decoded != inBody {
		return mismatch(fmt.Sprintf("header mismatch: Mcp-Name header value %q does not match body value %q of params.%s",
			decoded, inBody, param))
	}
	return nil
}

// decodeHeaderValue undoes the Base64 sentinel form (=?base64?...?=) a
// client must use for a value that is not plain header-safe ASCII
// (2026-07-28, Streamable HTTP, Value Encoding: servers "MUST decode an
// encoded Mcp-Name ... before comparing it"); other values are verbatim.
func decodeHeaderValue(v string) (string, bool) {
	encoded, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	encoded, ok = strings.CutSuffix(encoded, "?=")
	if !ok {
		return v, true
	}
	decoded, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return "", false
	}
	return string(decoded), true
}

// batchProtocol is the one protocol revision with JSON-RPC batches (added
// in it, removed in 2025-06-18); a request without an MCP-Protocol-Version
// header is taken to be at it.
const batchProtocol = "2025-03-26"

// maxBatchEntries bounds the entries of a JSON-RPC batch. API Gateway
// throttles HTTP requests, not the calls inside them, and the SDK runs
// every entry (concurrently), so a batch multiplies what one throttled
// request may cost; this many covers the parallel calls of one client turn.
const maxBatchEntries = 8

// checkBatch refuses a JSON-RPC batch (data, valid JSON, is an array) at a
// protocol version without batches, one past maxBatchEntries, one with an
// entry that checkMessage refuses, and one that sends an Idempotency-Key
// header with more than one call of a tool that takes it: the header names
// one call, and two writes under it would share one key (the second told
// its key was used with other arguments, or taken for the first's replay).
// A batch is refused whole, as the SDK
// refuses one naming an unknown method, so nothing in it runs: HTTP 400,
// no id, the entry's error code and message, numbered from 1.
func (b *boundary) checkBatch(header http.Header, data []byte) *refusal {
	if v := header.Get("MCP-Protocol-Version"); v != "" && v != batchProtocol {
		return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"JSON-RPC batches are part of protocol " + batchProtocol + " only; send one message per request"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the opening '['
		return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: body is not valid JSON"}
	}
	n := 0
	ids := map[any]bool{}
	// As a tool call reads it (trimmed; empty is none): a header without a
	// value names no call, and each write keeps its own key.
	underKey := slices.ContainsFunc(header.Values(HeaderIdempotencyKey), func(v string) bool { return strings.TrimSpace(v) != "" })
	firstKeyed := 0 // the entry (from 1) of the first call under the header's key
	// Entries are read one at a time, so a long batch costs no more than
	// its first maxBatchEntries entries (More only peeks at the next).
	for ; dec.More(); n++ {
		if n == maxBatchEntries {
			return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("a JSON-RPC batch may hold at most %d entries; send the rest in further requests", maxBatchEntries)}
		}
		var entry json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: body is not valid JSON"}
		}
		req, refused := b.checkMessage(header, entry)
		if refused == nil && req != nil {
			refused = checkBatchedRequest(req, ids)
		}
		if refused == nil && req != nil && underKey && b.takesKey(req) {
			if firstKeyed == 0 {
				firstKeyed = n + 1
			} else {
				refused = &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
					"a write under the Idempotency-Key header, which names one call, and entry %d is one too; "+
						"send each write's operation_id in its arguments and no header, or one write per request", firstKeyed)}
			}
		}
		if refused != nil {
			return &refusal{http.StatusBadRequest, jsonrpc.ID{}, refused.code,
				shortenMessage(fmt.Sprintf("batch entry %d: %s", n+1, refused.message))}
		}
	}
	if n == 0 {
		return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid JSON-RPC batch: it is empty"}
	}
	return nil
}

// checkBatchedRequest refuses what a request may not be inside a batch:
// an initialize (2025-03-26, Lifecycle: it "MUST NOT be part of a JSON-RPC
// batch"; run first, it would set the revision the other entries are
// judged at, unchecked), and a request whose id an earlier entry used (one
// answer for two calls, which the client cannot tell apart). ids collects
// the ids seen; 1 and "1" are different ids.
func checkBatchedRequest(req *jsonrpc.Request, ids map[any]bool) *refusal {
	if req.Method == "initialize" {
		return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"initialize must not be part of a JSON-RPC batch; send it alone"}
	}
	id := req.ID.Raw()
	if ids[id] {
		return &refusal{http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request id %v is used by an earlier entry; each request in a batch needs its own id", id)}
	}
	ids[id] = true
	return nil
}

// takesKey says whether req is a tools/call of a tool that takes the
// Idempotency-Key header as its key.
func (b *boundary) takesKey(req *jsonrpc.Request) bool {
	if req.Method != "tools/call" {
		return false
	}
	raw, ok := ParamsMember(req.Params, "name")
	var name string
	return ok && json.Unmarshal(raw, &name) == nil && b.keyed[name]
}

// unknownTool reports a tools/call naming a tool that is not registered,
// with the name quoted and shortened for the answer. Malformed params are
// left to the SDK.
func (b *boundary) unknownTool(req *jsonrpc.Request) (string, bool) {
	if req.Method != "tools/call" || b.tools == nil {
		return "", false
	}
	raw, ok := ParamsMember(req.Params, "name")
	var name string
	if !ok || string(raw) == "null" || json.Unmarshal(raw, &name) != nil || b.tools[name] {
		return "", false
	}
	if len(name) <= maxEchoedToolName {
		return fmt.Sprintf("%q", name), true
	}
	cut := maxEchoedToolName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", name[:cut], len(name)), true
}

// shortenMessage cuts msg to maxErrorMessage runes.
func shortenMessage(msg string) string {
	if utf8.RuneCountInString(msg) <= maxErrorMessage {
		return msg
	}
	return string([]rune(msg)[:maxErrorMessage-1]) + "…"
}

// newProtocol is the first protocol version whose JSON-RPC errors carry an
// HTTP status (SEP-2575: invalid params is 400).
const newProtocol = "2026-07-28"

// invalidParamsStatus is the HTTP status of an invalid-params error, as the
// SDK would send it: 400 from protocol 2026-07-28 on (version in _meta or
// the MCP-Protocol-Version header), 200 before.
func invalidParamsStatus(header http.Header, req *jsonrpc.Request) int {
	if requestRevision(header, req) >= newProtocol {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// hasUnpairedSurrogate reports a \u escape in data (valid JSON) that is a
// UTF-16 surrogate without its partner. Backslashes occur only inside
// strings in valid JSON, so no string tracking is needed.
func hasUnpairedSurrogate(data []byte) bool {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 >= len(data) || data[i+1] != 'u' {
			i++ // an escaped character, e.g. \\ or \"
			continue
		}
		r, ok := hex4(data[i+2:])
		if !ok {
			return false // not valid JSON; json.Valid said otherwise
		}
		next := i + 6
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if next+1 >= len(data) || data[next] != '\\' || data[next+1] != 'u' {
				return true
			}
			low, ok := hex4(data[next+2:])
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			next += 6
		}
		i = next - 1
	}
	return false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string) {
	writeRPCErrorData(w, status, id, code, message, nil)
}

func writeRPCErrorData(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string, errData json.RawMessage) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: message, Data: errData}})
	if err != nil {
		http.Error(w, message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("X-Content-Type-Options")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// rpcErrorWriter lets SDK responses through unchanged, except a plain-text
// error (the SDK's http.Error for a bad POST, e.g. an unknown method under
// pre-2026 protocol versions), which it holds back and rewrites as a
// JSON-RPC error with the same HTTP status.
type rpcErrorWriter struct {
	http.ResponseWriter
	wroteHeader bool
	capturing   bool
	status      int
	captured    bytes.Buffer
	// capturedJSON: the held-back answer is the SDK's own JSON-RPC error,
	// rewritten only to shorten its message.
	capturedJSON bool
}

// maxErrorMessage bounds the message of a JSON-RPC error the boundary
// passes on: the SDK's messages quote caller input (a method name, an
// Mcp-Name header) at full length.
const maxErrorMessage = 300

func (w *rpcErrorWriter) WriteHeader(status int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if status >= 400 {
		switch ct := w.Header().Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/plain"):
			w.capturing, w.status = true, status
			return
		case strings.HasPrefix(ct, "application/json"):
			w.capturing, w.capturedJSON, w.status = true, true, status
			return
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *rpcErrorWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.capturing {
		return w.captured.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps SSE responses streaming.
func (w *rpcErrorWriter) Flush() {
	if w.capturing {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *rpcErrorWriter) finish(id jsonrpc.ID) {
	if !w.capturing {
		return
	}
	if w.capturedJSON {
		msg, err := jsonrpc.DecodeMessage(w.captured.Bytes())
		resp, ok := msg.(*jsonrpc.Response)
		var rpcErr *jsonrpc.Error
		if err != nil || !ok || !errors.As(resp.Error, &rpcErr) {
			w.ResponseWriter.WriteHeader(w.status)
			_, _ = w.ResponseWriter.Write(w.captured.Bytes())
			return
		}
		// Only the message is shortened; data (e.g. the capabilities a
		// -32021 requires) is part of the error's meaning and kept.
		writeRPCErrorData(w.ResponseWriter, w.status, resp.ID, rpcErr.Code, shortenMessage(rpcErr.Message), rpcErr.Data)
		return
	}
	message := shortenMessage(strings.TrimSpace(w.captured.String()))
	code := int64(jsonrpc.CodeInvalidRequest)
	// The SDK words an unknown method as jsonrpc2.ErrNotHandled
	// ("JSON RPC not handled: \"x\" unsupported"); a test pins this.
	if strings.HasPrefix(message, "JSON RPC not handled") {
		code = jsonrpc.CodeMethodNotFound
	}
	writeRPCError(w.ResponseWriter, w.status, id, code, message)
}
