package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/requestid"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// Version is reported in server/discover and initialize.
const Version = "0.1.0"

// Options are the non-environment inputs of Build.
type Options struct {
	// Out receives audit records, EMF metrics and logs (JSON lines).
	// Default os.Stdout, which Lambda ships to CloudWatch Logs.
	Out io.Writer
	// Clock replaces time.Now (tests).
	Clock func() time.Time
	// DynamoDB, if set, is the client the store uses instead of one built
	// from the configuration (the fault campaign wraps its HTTP transport).
	DynamoDB *dynamodb.Client
	// PrefetchJWKS starts the verifier's first JWKS fetch in Build, so it
	// overlaps the SecureString reads; Handler waits for it. For the
	// process that serves MCP (functions/mcp); without it Handler fetches,
	// and a process that never calls Handler (the reconciler) never
	// depends on the issuer.
	PrefetchJWKS bool
}

// App is the wired system.
type App struct {
	Config   Config
	Store    *store.Store
	Executor *tools.Executor
	// Families by tool name: what the reconciler needs.
	Families map[string]tools.WriteTool
	Gate     *admission.Gate
	Auditor  *obs.Auditor
	Metrics  *obs.Metrics
	Tracer   *obs.Tracer
	Logger   *slog.Logger

	jwks       *jwksFetch // nil without a JWKS
	verifier   *auth.Verifier
	coldStarts obs.ColdStarts
	// writes are the families as MCP tools, in name order so tools/list
	// is stable.
	writes []tools.Published
}

// Build wires the parts shared by the MCP function, the reconciler and the
// devstack. Its only network calls are SSM reads of downstream API keys
// given as parameter names (see resolveAPIKeys) and, with a JWKS
// configured and Options.PrefetchJWKS, the verifier's first fetch, which it
// starts alongside them and Handler waits for.
func Build(ctx context.Context, cfg Config, opts Options) (a *App, err error) {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if cfg.Stage == "" {
		cfg.Stage = DefaultStage // a Config not from FromEnv; an empty dimension would fail every metric
	}
	logger := slog.New(obs.JoinKeys(slog.NewJSONHandler(opts.Out, &slog.HandlerOptions{Level: cfg.LogLevel})))
	tracer, err := obs.NewTracer(obs.TracerConfig{Enabled: cfg.Tracing, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	awsCfg, err := loadAWSConfig(ctx, cfg, tracer)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var jwks *jwksFetch
	if opts.PrefetchJWKS {
		jwks = startJWKSFetch(ctx, cfg, tracer, logger)
	}
	cfg, err = resolveAPIKeys(ctx, cfg, awsCfg)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	// Audit records, logs and EMF documents share opts.Out; each is written
	// as one whole line per Write, so CloudWatch keeps them apart.
	a = &App{
		Config: cfg,
		jwks:   jwks,
		// Audit records are never filtered by the log level.
		Auditor: obs.NewAuditorFromHandler(obs.JoinKeys(slog.NewJSONHandler(opts.Out, &slog.HandlerOptions{Level: slog.LevelInfo}))),
		Metrics: newMetrics(opts.Out, opts.Clock, cfg.Stage, logger),
		Tracer:  tracer,
		Logger:  logger,
	}
	db := opts.DynamoDB
	if db == nil {
		db = dynamodb.NewFromConfig(awsCfg, store.ClientOptions(cfg.DynamoDBEndpoint))
	}
	if a.Store, err = store.New(db, store.Config{Table: cfg.Table, Retention: cfg.Retention, DueShards: cfg.DueShards, SweptDueShards: cfg.SweptDueShards}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if a.Gate, err = admission.NewGate(admission.GateConfig{MaxInFlight: cfg.MaxInFlight, MaxQueue: cfg.MaxQueue, MaxWait: cfg.MaxQueueWait}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if a.Executor, err = tools.NewExecutor(tools.ExecutorConfig{
		Store: a.Store, Budget: cfg.Budget, Clock: opts.Clock, ClockSkewBound: cfg.ClockSkewBound,
		Observe: observe(a.Auditor, a.Metrics),
	}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if a.writes, err = a.families(); err != nil {
		return nil, err
	}
	a.Families = make(map[string]tools.WriteTool, len(a.writes))
	for _, w := range a.writes {
		a.Families[w.Name()] = w
	}
	return a, nil
}

// families builds the downstream clients and tool families, in name order.
// The same connection cap applies per process to each downstream.
func (a *App) families() ([]tools.Published, error) {
	cfg := a.Config
	wrap := func(rt http.RoundTripper) http.RoundTripper {
		return a.Tracer.HTTPClient(&http.Client{Transport: rt}).Transport
	}
	risk, err := provider.NewRiskClient(provider.RiskConfig{
		BaseURL: cfg.RiskAPIURL, APIKey: cfg.RiskAPIKey, MaxConns: cfg.DownstreamMaxConns,
		Timeout: cfg.Budget.Downstream, SettleWindow: cfg.RiskSettleWindow, WrapTransport: wrap,
	})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	recovery := riskreview.DefaultRecovery()
	recovery.SettleWindow = cfg.RiskSettleWindow
	families := []tools.Published{riskreview.New(risk, recovery)}
	if cfg.ReleaseAPIURL == "" {
		return families, nil
	}
	rel, err := provider.NewReleaseClient(provider.ReleaseConfig{
		BaseURL: cfg.ReleaseAPIURL, APIKey: cfg.ReleaseAPIKey, MaxConns: cfg.DownstreamMaxConns,
		Timeout: cfg.Budget.Downstream, SettleWindow: cfg.ReleaseSettleWindow, WrapTransport: wrap,
	})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	grants, err := policy.ParseDeployGrants(cfg.DeployGrants)
	if err != nil {
		return nil, fmt.Errorf("app: INTENTGATE_DEPLOY_GRANTS: %w", err)
	}
	relRecovery := release.DefaultRecovery()
	relRecovery.SettleWindow = cfg.ReleaseSettleWindow
	relRecovery.CommitDeadline = cfg.ReleaseCommitDeadline
	families = append(families, release.New(rel, grants, relRecovery))
	slices.SortFunc(families, func(x, y tools.Published) int { return strings.Compare(x.Name(), y.Name()) })
	return families, nil
}

// metricsNamespace is the CloudWatch namespace of every EMF metric; the
// template's alarms and dashboard read it.
const metricsNamespace = "intentgate"

// newMetrics is the functions' EMF writer: every metric is also published
// under exactly [Stage], which the alarms and the dashboard select on.
func newMetrics(out io.Writer, clock func() time.Time, stage string, logger *slog.Logger) *obs.Metrics {
	return obs.NewMetrics(out, metricsNamespace, clock).WithBaseDimensions(map[string]string{obs.DimStage: stage}).WithErrorLog(logger)
}

// Close releases the trace socket.
func (a *App) Close(ctx context.Context) error {
	return a.Tracer.Close()
}

// Handler is the whole HTTP surface: RFC 9728 metadata (public) and the MCP
// endpoint behind bearer authentication. It waits for the JWKS fetch (the
// one Build started, or its own), so a wrong issuer URL fails at start, not
// on the first caller; it builds the MCP server first, while the fetch is
// in flight.
func (a *App) Handler(ctx context.Context) (http.Handler, error) {
	if err := a.Config.ValidateAuth(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if a.jwks == nil {
		a.jwks = startJWKSFetch(ctx, a.Config, a.Tracer, a.Logger)
	}
	writes := a.writes
	var extensions []mcpserver.Extension
	if a.Config.TaskIDKey != "" {
		ext, err := a.tasksExtension(writes)
		if err != nil {
			return nil, err
		}
		extensions = append(extensions, ext)
	}
	gw, err := gateway.New(gateway.Config{
		Executor: a.Executor, Writes: writes,
		Gate: a.Gate, Auditor: a.Auditor, Metrics: a.Metrics, Logger: a.Logger,
		Tasks: len(extensions) > 0,
	})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	mcpHandler, err := gw.Handler(mcpserver.Config{
		Name: "intentgate", Version: Version, Logger: a.Logger, MaxBodyBytes: a.Config.MaxBodyBytes, Extensions: extensions,
		TrustedOrigins: a.Config.TrustedOrigins,
		Instructions: "Write tools are exactly-once: choose an operation_id before the first attempt and reuse it on every retry. " +
			"UNKNOWN means the outcome is not yet proven: query status with the returned handle; never resend with a new operation_id.",
	})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	metadataURL, err := auth.ResourceMetadataURL(a.Config.ResourceURL)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	// Waited for only now: the MCP server above is built while the keys
	// are on their way.
	if a.jwks != nil && a.verifier == nil {
		v, err := a.jwks.wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		a.verifier = v
		if a.Config.TrustGatewayAuthorizer {
			if !v.HasKeyType("RSA") {
				return nil, fmt.Errorf("app: INTENTGATE_TRUST_GATEWAY_AUTHORIZER=true (GatewayJwtAuthorizer) needs an issuer signing with RSA: "+
					"API Gateway's JWT authorizer verifies RSA signatures only, and %s has no RSA signing key (use GatewayJwtAuthorizer=false)", a.Config.JWKSURL)
			}
		}
	}
	authn := auth.Middleware(auth.MiddlewareConfig{
		Verifier: a.verifier, TrustGatewayAuthorizer: a.Config.TrustGatewayAuthorizer,
		ResourceMetadataURL: metadataURL, Logger: a.Logger, RequiredScope: a.Config.RequiredScope,
		OnReject: func(ctx context.Context, reason string) {
			a.Auditor.Record(ctx, obs.AuditRecord{Kind: obs.KindAuthReject, ErrorClass: reason, RequestID: requestid.From(ctx).Request})
			a.Metrics.AuthRejection(ctx, reason)
			if auth.IsInvalidTokenReason(reason) {
				a.Metrics.InvalidToken(ctx, reason)
			}
		},
	})
	mux := http.NewServeMux()
	paths, err := auth.ProtectedResourceMetadataPaths(a.Config.ResourceURL)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var servers []string
	if a.Config.JWTIssuer != "" {
		servers = []string{a.Config.JWTIssuer}
	}
	var scopes []string
	if a.Config.RequiredScope != "" {
		scopes = []string{a.Config.RequiredScope}
	}
	meta := auth.ProtectedResourceMetadataHandler(a.Config.ResourceURL, servers, scopes)
	for _, p := range paths {
		mux.Handle("GET "+p, meta)
	}
	// The Origin check comes before authentication: a foreign Origin is
	// answered 403 whatever the token (mcpserver.RefuseCrossOrigin).
	guarded, err := mcpserver.RefuseCrossOrigin(a.Config.TrustedOrigins, authn(mcpHandler))
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	mux.Handle("/mcp", guarded)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return a.Tracer.Handler("intentgate-mcp", a.withInvocation(mux)), nil
}

// withInvocation marks each request as one invocation for the logs (see
// Invocation).
func (a *App) withInvocation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, done := a.Invocation(r.Context())
		defer done()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Invocation returns ctx marked as one invocation of this process: every
// log line and audit record written with it carries the function name,
// whether it is the cold start, the request ids the front set
// (internal/requestid; none for non-HTTP triggers) and the X-Ray trace id, and its metrics are batched into one
// EMF document per dimension set, written by done (call it when the
// invocation ends). The cold start is also counted (cold_starts).
func (a *App) Invocation(ctx context.Context) (_ context.Context, done func()) {
	ctx, batch := a.Metrics.StartBatch(ctx)
	cold := a.coldStarts.First()
	function := a.Config.FunctionName
	if cold {
		name := function
		if name == "" {
			name = "local"
		}
		a.Metrics.ColdStart(ctx, name)
	}
	ctx = obs.WithInvocation(ctx, obs.Invocation{Function: function, ColdStart: cold})
	return ctx, func() {
		if err := batch.Flush(); err != nil {
			a.Logger.ErrorContext(ctx, "write metrics", "error", err.Error())
		}
	}
}

// taskIDs mints task ids under the first configured key and verifies them
// under every one (a rotation's previous key).
func (a *App) taskIDs() (tasks.IDs, error) {
	keys, err := tasks.Keys(a.Config.TaskIDKey)
	if err != nil {
		return tasks.IDs{}, fmt.Errorf("INTENTGATE_TASK_ID_KEY: %w", err)
	}
	return tasks.NewIDs(keys...)
}

// tasksExtension serves MCP Tasks for the write tools from the operation
// table.
func (a *App) tasksExtension(writes []tools.Published) (mcpserver.Extension, error) {
	ids, err := a.taskIDs()
	if err != nil {
		return mcpserver.Extension{}, fmt.Errorf("app: %w", err)
	}
	svc, err := tasks.New(tasks.Config{
		Executor: a.Executor, Tools: writes, IDs: ids, Caller: gateway.CallerFrom,
		Operator: a.Config.Operator, Retention: a.Config.Retention,
		Auditor: a.Auditor, Logger: a.Logger,
	})
	if err != nil {
		return mcpserver.Extension{}, fmt.Errorf("app: %w", err)
	}
	return svc.Extension(), nil
}

// LambdaOptions are the adapter options matching this configuration. In
// plain-HTTP mode each request gets the whole budget as its deadline, standing
// in for the Lambda deadline. The
// authorizer's claims are handed to auth only when the gateway is trusted.
func (a *App) LambdaOptions() lambdahttp.Options {
	opts := lambdahttp.Options{Logger: a.Logger, LocalTimeout: a.Config.Budget.Total()}
	if a.Config.TrustGatewayAuthorizer {
		opts.WithGatewayClaims = auth.WithGatewayClaims
	}
	return opts
}

var errNoFamily = errors.New("no such tool family")

// Family returns the family registered for a tool name.
func (a *App) Family(tool string) (tools.WriteTool, error) {
	f, ok := a.Families[tool]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNoFamily, tool)
	}
	return f, nil
}

// Reconciler builds the reconciler over the same executor and families.
func (a *App) Reconciler() (*reconcile.Service, error) {
	svc, err := reconcile.New(reconcile.Config{
		Executor: a.Executor, Families: a.Families, Operator: a.Config.Operator, Auditor: a.Auditor,
	})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return svc, nil
}
