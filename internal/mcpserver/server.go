package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/requestid"
)

// Config describes the server to MCP clients.
type Config struct {
	Name         string
	Version      string
	Instructions string
	// Logger receives this package's warnings and the SDK's warnings and
	// errors (the SDK's per-request info lines are dropped). Nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Extensions are protocol extensions plugged in through the SDK's own
	// extension points; each is advertised in capabilities.extensions.
	Extensions []Extension
	// ErrorCodes are the codes the tools' BusinessError results carry. The
	// error envelope every outputSchema admits lists them (with this
	// package's own CodeInvalidArgument and CodeOperationUnknown), so a
	// result with any other code does not conform.
	ErrorCodes []string
	// TrustedOrigins are web origins besides the server's own whose
	// requests are served (RefuseCrossOrigin).
	TrustedOrigins []string
}

// Extension is a protocol extension: its identifier, advertised with empty
// settings, and what it installs on the SDK server (receiving middleware,
// custom methods). Install runs once, before any tool is added.
type Extension struct {
	ID      string
	Install func(*mcp.Server) error
	// NameParams maps each of the extension's methods whose Mcp-Name
	// header (protocol 2026-07-28 on) mirrors a params field to that
	// field: the boundary checks the header against the body as the SDK
	// does for tools/call (Streamable HTTP, Server Validation), since the
	// SDK knows no custom method's name source.
	NameParams map[string]string
	// RefuseCall, when set, is asked about every tools/call before the
	// SDK sees it, with the request's protocol revision (its _meta's, else
	// the MCP-Protocol-Version header's) and raw params; a refusal is the
	// answer. It exists for refusals whose message must reach the client:
	// the SDK rewrites every -32601 a handler returns into its own
	// `method not found: "tools/call"`.
	RefuseCall func(revision string, params json.RawMessage) *jsonrpc.Error
}

// DefaultMaxBodyBytes caps a request body. The largest legitimate call
// (a resolution with 1,000 characters of evidence) is at most 12 KiB even
// with every character \u-escaped; the cap
// refuses hostile bodies after reading at most this much, before any JSON
// is parsed (the SDK's own default is 4 MiB).
const DefaultMaxBodyBytes = 32 << 10

// New returns the MCP endpoint: the go-sdk streamable HTTP handler in
// stateless, JSON-response mode serving tools, behind the request boundary
// described in the package documentation.
//
// One *mcp.Server serves every request. That is the SDK's intended use
// ("It is OK for getServer to return the same server multiple times"): each
// stateless request gets its own ServerSession, and the Server guards its
// shared state with a mutex. Tools are fixed here; none are added later.
func New(cfg Config, tools ...Tool) (http.Handler, error) {
	if cfg.Name == "" || cfg.Version == "" {
		return nil, fmt.Errorf("mcpserver: Config.Name and Config.Version are required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	maxBody := cfg.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	sdkLogger := slog.New(minLevelHandler{min: slog.LevelWarn, next: logger.Handler()})
	capabilities := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}}
	named := map[string]string{}
	var refuseCalls []func(string, json.RawMessage) *jsonrpc.Error
	for _, ext := range cfg.Extensions {
		if ext.RefuseCall != nil {
			refuseCalls = append(refuseCalls, ext.RefuseCall)
		}
		if ext.ID == "" || ext.Install == nil {
			return nil, fmt.Errorf("mcpserver: an extension needs an ID and an Install function")
		}
		capabilities.AddExtension(ext.ID, map[string]any{})
		for method, param := range ext.NameParams {
			if _, taken := named[method]; taken || method == "" || param == "" {
				return nil, fmt.Errorf("mcpserver: extension %s: Mcp-Name source of %q is empty or declared twice", ext.ID, method)
			}
			named[method] = param
		}
	}

	server := mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: cfg.Instructions,
		Logger:       sdkLogger,
		// Tools without listChanged, and no logging capability: a stateless
		// server has nowhere to push notifications, and with nothing to
		// subscribe to, subscriptions/listen is answered at once instead of
		// being held open (API Gateway buffers responses).
		Capabilities: capabilities,
	})
	// Added first, so it is the innermost middleware: it wraps the method
	// handlers themselves, not the extensions' middleware.
	server.AddReceivingMiddleware(withRequestDeadline)
	for _, ext := range cfg.Extensions {
		if err := ext.Install(server); err != nil {
			return nil, fmt.Errorf("mcpserver: extension %s: %w", ext.ID, err)
		}
	}
	// Added last, so it is the outermost: the SDK runs method handlers on
	// a goroutine of its own and recovers nothing, so a panic anywhere
	// below would end the process and every request in flight.
	server.AddReceivingMiddleware(recoverPanics(logger))

	envelope, err := errorEnvelopeSchema(errorCodes(cfg.ErrorCodes))
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	seen := make(map[string]bool, len(tools))
	keyed := map[string]bool{}
	for _, t := range tools {
		rt, err := registerTool(t, envelope, logger)
		if err != nil {
			return nil, fmt.Errorf("mcpserver: %w", err)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("mcpserver: tool %q registered twice", t.Name)
		}
		seen[t.Name] = true
		keyed[t.Name] = t.TakesIdempotencyKey
		if err := addTool(server, rt); err != nil {
			return nil, fmt.Errorf("mcpserver: %w", err)
		}
	}

	sdkHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              sdkLogger,
		MaxRequestBodyBytes: maxBody,
		// Left false on purpose: a client hanging up must not cancel a write
		// that is already under way (a timeout ends the wait, not the
		// operation).
		PropagateRequestCancellation: false,
	})
	guarded, err := RefuseCrossOrigin(cfg.TrustedOrigins, &boundary{next: sdkHandler, maxBody: maxBody, tools: seen, keyed: keyed, named: named, refuseCalls: refuseCalls})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	return guarded, nil
}

// addTool registers with the SDK's low-level Server.AddTool, which leaves
// argument validation to us. It panics on schemas it rejects (e.g. a bad
// x-mcp-header annotation); that becomes an error here.
func addTool(server *mcp.Server, rt *registeredTool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q rejected by the SDK: %v", rt.tool.Name, p)
		}
	}()
	server.AddTool(rt.mcpTool(), rt.handle)
	return nil
}

// minLevelHandler drops records below min. The SDK logs every stateless
// request's connect and disconnect at info level.
type minLevelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h minLevelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.next.Enabled(ctx, level)
}

func (h minLevelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{min: h.min, next: h.next.WithGroup(name)}
}

// recoverPanics answers a method whose handling panicked with -32603 and
// logs the panic; a tool call's own panic is caught closer to the tool
// (registeredTool.handle), where its answer can say the outcome is unknown.
func recoverPanics(logger *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (result mcp.Result, err error) {
			defer func() {
				if p := recover(); p != nil {
					logger.ErrorContext(ctx, "method handler panicked", "method", method,
						"request_id", requestid.From(ctx).Request, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					result, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
						Message: "internal error while handling " + method + "; if it started a write, its outcome is unknown: call again with the same operation_id"}
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// withRequestDeadline gives a method handler the HTTP request's deadline
// back. The SDK detaches handler contexts from the HTTP request, deadline
// included; a handler budgeting its downstream calls needs it. Cancellation
// is deliberately not restored: a caller hanging up ends its wait, not an
// operation already under way.
func withRequestDeadline(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if info := requestInfoFrom(ctx); info != nil && info.hasDeadline {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, info.deadline)
			defer cancel()
		}
		return next(ctx, method, req)
	}
}
