// Package app is the composition root: it reads configuration from the
// environment, builds every part (store, provider clients, tool families,
// executor, admission gate, auth, MCP server) and hands back the HTTP
// handler and the reconciler families. functions/mcp, functions/reconciler
// and the devstack all start here, so they run the same wiring.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tasks"
)

// DefaultStage is the Stage metric dimension when INTENTGATE_STAGE is unset.
const DefaultStage = "dev"

// Bounds of INTENTGATE_MAX_BODY_BYTES. Below 16 KiB a resolution with
// 1,000 characters of evidence, each sent as a \u-escaped surrogate pair,
// no longer fits; a body under the cap is decoded several times by
// the MCP SDK before any of our checks (about 0.45 s of CPU per MB of
// hostile JSON, make bench-input), so the cap stops at 256 KiB.
const (
	DefaultMaxBodyBytes = 32 << 10
	MinMaxBodyBytes     = 16 << 10
	MaxMaxBodyBytes     = 256 << 10
)

// Config is every setting, with the environment variable that sets it.
// README.md's configuration table lists the same names and defaults.
type Config struct {
	Table            string        // INTENTGATE_TABLE
	DynamoDBEndpoint string        // INTENTGATE_DYNAMODB_ENDPOINT (empty: AWS)
	SSMEndpoint      string        // INTENTGATE_SSM_ENDPOINT (default: INTENTGATE_DYNAMODB_ENDPOINT; empty: AWS)
	Region           string        // AWS_REGION
	FunctionName     string        // AWS_LAMBDA_FUNCTION_NAME (set by Lambda): the function key of every log line
	Retention        time.Duration // INTENTGATE_RETENTION
	Stage            string        // INTENTGATE_STAGE: the Stage dimension of every metric (default dev)

	ResourceURL            string // INTENTGATE_RESOURCE_URL: this server's MCP URL, the token audience
	JWTIssuer              string // INTENTGATE_JWT_ISSUER
	JWKSURL                string // INTENTGATE_JWKS_URL
	JWTAudience            string // INTENTGATE_JWT_AUDIENCE (default: ResourceURL)
	TrustGatewayAuthorizer bool   // INTENTGATE_TRUST_GATEWAY_AUTHORIZER
	// RequiredScope (INTENTGATE_REQUIRED_SCOPE): an OAuth scope every token
	// must carry, checked by the server in either mode; empty: none.
	RequiredScope string

	RiskAPIURL string // INTENTGATE_RISK_API_URL
	RiskAPIKey string // INTENTGATE_RISK_API_KEY (raw key: local runs and tests)
	// INTENTGATE_RISK_API_KEY_PARAMETER: SSM SecureString holding the Risk
	// API key, read by Build when RiskAPIKey is empty (the deployed form).
	RiskAPIKeyParameter string
	RiskSettleWindow    time.Duration // INTENTGATE_RISK_SETTLE_WINDOW

	ReleaseAPIURL string // INTENTGATE_RELEASE_API_URL (empty: ticket tools off)
	ReleaseAPIKey string // INTENTGATE_RELEASE_API_KEY (raw key: local runs and tests)
	// INTENTGATE_RELEASE_API_KEY_PARAMETER: as RiskAPIKeyParameter, for the
	// Release API key; read only when INTENTGATE_RELEASE_API_URL is set.
	ReleaseAPIKeyParameter string
	ReleaseSettleWindow    time.Duration // INTENTGATE_RELEASE_SETTLE_WINDOW
	// INTENTGATE_RELEASE_COMMIT_DEADLINE: the Release API honours the
	// commit deadline sent with each create (default true). false: proven
	// absence of a ticket escalates instead of re-sending.
	ReleaseCommitDeadline bool
	// INTENTGATE_CLOCK_SKEW_BOUND: the most the clocks of dispatchers,
	// reconcilers and providers may disagree (default DefaultClockSkewBound).
	ClockSkewBound time.Duration
	DeployGrants   string // INTENTGATE_DEPLOY_GRANTS: team=svc,svc;team2=svc
	Operator       string // INTENTGATE_OPERATOR: named operator escalations go to

	MaxInFlight        int           // INTENTGATE_MAX_IN_FLIGHT
	MaxQueue           int           // INTENTGATE_MAX_QUEUE
	MaxQueueWait       time.Duration // INTENTGATE_MAX_QUEUE_WAIT
	DownstreamMaxConns int           // INTENTGATE_DOWNSTREAM_MAX_CONNS
	// INTENTGATE_DUE_SHARDS: due-index shards new entries are spread over
	// (default 16, docs/capacity.md). INTENTGATE_DUE_SHARDS_SWEPT: shards
	// the sweep reads at least (default INTENTGATE_DUE_SHARDS, also when 0);
	// it also reads those of every count a writer recorded in the table.
	DueShards, SweptDueShards int
	Budget                    admission.BudgetConfig
	// INTENTGATE_BUDGET_AUTH, _STORE, _DOWNSTREAM (alias INTENTGATE_DOWNSTREAM_TIMEOUT), _RESERVE

	// INTENTGATE_MAX_BODY_BYTES: the largest MCP request body accepted
	// (default 32768); larger ones are refused with HTTP 413 after reading
	// at most this much, before any JSON is parsed.
	MaxBodyBytes int64

	// INTENTGATE_INVOCATION_TIMEOUT: the function's timeout (template.yaml
	// sets it from each function's Timeout). The whole request budget must
	// fit inside it, or a call (or a reconciler claim) could be cut off by
	// Lambda mid-write. 0 (unset): no such check (plain-HTTP mode).
	InvocationTimeout time.Duration

	// TrustedOrigins (INTENTGATE_TRUSTED_ORIGINS, comma-separated
	// scheme://host[:port]) are web origins besides this server's own whose
	// requests are served: a hosted client whose backend sends its web
	// origin. Any other Origin is refused 403 (mcpserver.RefuseCrossOrigin).
	TrustedOrigins []string

	ListenAddr string     // INTENTGATE_LISTEN_ADDR (plain-HTTP mode)
	Tracing    bool       // INTENTGATE_TRACING (default: on under Lambda)
	LogLevel   slog.Level // INTENTGATE_LOG_LEVEL, else AWS_LAMBDA_LOG_LEVEL (set by Lambda from LoggingConfig); default INFO
	// TaskIDKey (INTENTGATE_TASK_ID_KEY, at least 32 bytes, the same on
	// every instance) turns on the MCP Tasks extension; unset leaves it off.
	// During a rotation it carries the new and the previous key separated
	// by white space (tasks.Keys).
	TaskIDKey string
	// INTENTGATE_TASK_ID_KEY_PARAMETER: name of an SSM SecureString holding
	// the task id key, read decrypted at cold start when TaskIDKey is
	// unset (the deployed MCP function's only source of the key).
	TaskIDKeyParameter string
}

// Lookup reads one environment variable (os.LookupEnv in production).
type Lookup func(string) (string, bool)

// FromEnv reads and validates the configuration. Unset variables take the
// documented defaults; malformed ones are errors, never silently ignored.
func FromEnv(lookup Lookup) (Config, error) {
	e := envReader{lookup: lookup}
	budget := admission.DefaultBudget()
	c := Config{
		Table:                  e.str("INTENTGATE_TABLE", "intentgate-operations"),
		DynamoDBEndpoint:       e.str("INTENTGATE_DYNAMODB_ENDPOINT", ""),
		Region:                 e.str("AWS_REGION", e.str("AWS_DEFAULT_REGION", "us-east-1")),
		Retention:              e.dur("INTENTGATE_RETENTION", 90*24*time.Hour),
		Stage:                  e.str("INTENTGATE_STAGE", DefaultStage),
		ResourceURL:            e.str("INTENTGATE_RESOURCE_URL", "http://127.0.0.1:8080/mcp"),
		JWTIssuer:              e.str("INTENTGATE_JWT_ISSUER", ""),
		JWKSURL:                e.str("INTENTGATE_JWKS_URL", ""),
		TrustGatewayAuthorizer: e.boolean("INTENTGATE_TRUST_GATEWAY_AUTHORIZER", false),
		RequiredScope:          e.str("INTENTGATE_REQUIRED_SCOPE", ""),
		RiskAPIURL:             e.str("INTENTGATE_RISK_API_URL", ""),
		RiskAPIKey:             e.str("INTENTGATE_RISK_API_KEY", ""),
		RiskAPIKeyParameter:    e.str("INTENTGATE_RISK_API_KEY_PARAMETER", ""),
		RiskSettleWindow:       e.dur("INTENTGATE_RISK_SETTLE_WINDOW", 2*time.Second),
		ReleaseAPIURL:          e.str("INTENTGATE_RELEASE_API_URL", ""),
		ReleaseAPIKey:          e.str("INTENTGATE_RELEASE_API_KEY", ""),
		ReleaseAPIKeyParameter: e.str("INTENTGATE_RELEASE_API_KEY_PARAMETER", ""),
		ReleaseSettleWindow:    e.dur("INTENTGATE_RELEASE_SETTLE_WINDOW", 5*time.Second),
		ReleaseCommitDeadline:  e.boolean("INTENTGATE_RELEASE_COMMIT_DEADLINE", true),
		ClockSkewBound:         e.dur("INTENTGATE_CLOCK_SKEW_BOUND", DefaultClockSkewBound),
		DeployGrants:           e.str("INTENTGATE_DEPLOY_GRANTS", ""),
		Operator:               e.str("INTENTGATE_OPERATOR", reconcile.DefaultOperator),
		MaxInFlight:            e.integer("INTENTGATE_MAX_IN_FLIGHT", 8),
		MaxQueue:               e.integer("INTENTGATE_MAX_QUEUE", 16),
		MaxQueueWait:           e.dur("INTENTGATE_MAX_QUEUE_WAIT", time.Second),
		DueShards:              e.integer("INTENTGATE_DUE_SHARDS", store.DefaultDueShards),
		ListenAddr:             e.str("INTENTGATE_LISTEN_ADDR", "127.0.0.1:8080"),
		InvocationTimeout:      e.dur("INTENTGATE_INVOCATION_TIMEOUT", 0),
		// INTENTGATE_LOG_LEVEL first: the template keeps Lambda's own
		// filter (AWS_LAMBDA_LOG_LEVEL) at INFO so that it never drops
		// audit records and EMF documents, and the level chosen for the
		// functions' log lines comes from here.
		LogLevel:           e.logLevel("INTENTGATE_LOG_LEVEL", e.logLevel("AWS_LAMBDA_LOG_LEVEL", slog.LevelInfo)),
		MaxBodyBytes:       int64(e.integer("INTENTGATE_MAX_BODY_BYTES", DefaultMaxBodyBytes)),
		TrustedOrigins:     e.origins("INTENTGATE_TRUSTED_ORIGINS"),
		TaskIDKey:          e.str("INTENTGATE_TASK_ID_KEY", ""),
		TaskIDKeyParameter: e.str("INTENTGATE_TASK_ID_KEY_PARAMETER", ""),
		Budget: admission.BudgetConfig{
			Auth:       e.dur("INTENTGATE_BUDGET_AUTH", budget.Auth),
			Store:      e.dur("INTENTGATE_BUDGET_STORE", budget.Store),
			Downstream: e.dur("INTENTGATE_BUDGET_DOWNSTREAM", e.dur("INTENTGATE_DOWNSTREAM_TIMEOUT", budget.Downstream)),
			Reserve:    e.dur("INTENTGATE_BUDGET_RESERVE", budget.Reserve),
		},
	}
	_, underLambda := lookup("AWS_LAMBDA_FUNCTION_NAME")
	c.FunctionName = e.str("AWS_LAMBDA_FUNCTION_NAME", "")
	c.Tracing = e.boolean("INTENTGATE_TRACING", underLambda)
	c.JWTAudience = e.str("INTENTGATE_JWT_AUDIENCE", c.ResourceURL)
	c.SSMEndpoint = e.str("INTENTGATE_SSM_ENDPOINT", c.DynamoDBEndpoint)
	c.DownstreamMaxConns = e.integer("INTENTGATE_DOWNSTREAM_MAX_CONNS", c.MaxInFlight)
	if c.SweptDueShards = e.integer("INTENTGATE_DUE_SHARDS_SWEPT", 0); c.SweptDueShards == 0 {
		c.SweptDueShards = c.DueShards
	}
	if len(e.errs) > 0 {
		return Config{}, errors.Join(e.errs...)
	}
	return c, c.Validate()
}

// Validate checks the settings together.
func (c Config) Validate() error {
	var errs []error
	if c.Table == "" {
		errs = append(errs, errors.New("INTENTGATE_TABLE must not be empty"))
	}
	if c.TaskIDKey != "" {
		if _, err := tasks.Keys(c.TaskIDKey); err != nil {
			errs = append(errs, fmt.Errorf("INTENTGATE_TASK_ID_KEY: %w (one key of at least 32 bytes, or the new and the previous one separated by white space, the same on every instance; unset to turn MCP Tasks off)", err))
		}
	}
	if !validScope(c.RequiredScope) {
		errs = append(errs, fmt.Errorf("INTENTGATE_REQUIRED_SCOPE=%q: want one OAuth scope of 1 to %d printable ASCII characters, no space, '\\' or '\"'",
			c.RequiredScope, maxScopeLength))
	}
	if !validStage(c.Stage) {
		errs = append(errs, fmt.Errorf("INTENTGATE_STAGE=%q: want 1-64 letters, digits, '.', '_' or '-'", c.Stage))
	}
	for name, v := range map[string]string{
		"INTENTGATE_RISK_API_KEY_PARAMETER":    c.RiskAPIKeyParameter,
		"INTENTGATE_RELEASE_API_KEY_PARAMETER": c.ReleaseAPIKeyParameter,
		"INTENTGATE_TASK_ID_KEY_PARAMETER":     c.TaskIDKeyParameter,
	} {
		if v != "" && !validSSMName(v) {
			errs = append(errs, fmt.Errorf("%s=%q: not an SSM parameter name (/path/name of letters, digits, _ . - /)", name, v))
		}
	}
	for name, v := range map[string]string{"INTENTGATE_DYNAMODB_ENDPOINT": c.DynamoDBEndpoint, "INTENTGATE_SSM_ENDPOINT": c.SSMEndpoint} {
		if v == "" {
			continue
		}
		if err := absoluteURL(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if _, err := policy.ParseDeployGrants(c.DeployGrants); err != nil {
		errs = append(errs, fmt.Errorf("INTENTGATE_DEPLOY_GRANTS: %w", err))
	}
	if err := absoluteURL(c.ResourceURL); err != nil {
		errs = append(errs, fmt.Errorf("INTENTGATE_RESOURCE_URL: %w", err))
	}
	if c.RiskAPIURL == "" {
		errs = append(errs, errors.New("INTENTGATE_RISK_API_URL is required: the Risk API's base URL"))
	} else if err := absoluteURL(c.RiskAPIURL); err != nil {
		errs = append(errs, fmt.Errorf("INTENTGATE_RISK_API_URL: %w", err))
	}
	if c.ReleaseAPIURL != "" {
		if err := absoluteURL(c.ReleaseAPIURL); err != nil {
			errs = append(errs, fmt.Errorf("INTENTGATE_RELEASE_API_URL: %w", err))
		}
	}
	if c.MaxInFlight < 1 || c.MaxQueue < 0 || c.MaxQueueWait <= 0 || c.DownstreamMaxConns < 1 {
		errs = append(errs, errors.New("INTENTGATE_MAX_IN_FLIGHT and INTENTGATE_DOWNSTREAM_MAX_CONNS must be >= 1, INTENTGATE_MAX_QUEUE >= 0, INTENTGATE_MAX_QUEUE_WAIT > 0"))
	}
	if c.DueShards < 1 || c.DueShards > store.MaxDueShards || c.SweptDueShards < c.DueShards || c.SweptDueShards > store.MaxDueShards {
		errs = append(errs, fmt.Errorf("INTENTGATE_DUE_SHARDS must be 1 to %d and INTENTGATE_DUE_SHARDS_SWEPT from INTENTGATE_DUE_SHARDS to %d, got %d and %d",
			store.MaxDueShards, store.MaxDueShards, c.DueShards, c.SweptDueShards))
	}
	if err := c.Budget.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("INTENTGATE_BUDGET_AUTH, _STORE, _DOWNSTREAM (INTENTGATE_DOWNSTREAM_TIMEOUT), _RESERVE: %w", err))
	}
	if c.ClockSkewBound < 0 || c.ClockSkewBound > MaxClockSkewBound {
		errs = append(errs, fmt.Errorf("INTENTGATE_CLOCK_SKEW_BOUND must be 0 to %s, got %s", MaxClockSkewBound, c.ClockSkewBound))
	}
	if c.InvocationTimeout < 0 {
		errs = append(errs, errors.New("INTENTGATE_INVOCATION_TIMEOUT must not be negative"))
	}
	if c.InvocationTimeout > 0 && c.Budget.Total() >= c.InvocationTimeout {
		errs = append(errs, fmt.Errorf("the request budget (auth %s + store %s + downstream %s + reserve %s = %s) does not fit INTENTGATE_INVOCATION_TIMEOUT=%s: lower INTENTGATE_DOWNSTREAM_TIMEOUT",
			c.Budget.Auth, c.Budget.Store, c.Budget.Downstream, c.Budget.Reserve, c.Budget.Total(), c.InvocationTimeout))
	}
	if c.MaxBodyBytes < MinMaxBodyBytes || c.MaxBodyBytes > MaxMaxBodyBytes {
		errs = append(errs, fmt.Errorf("INTENTGATE_MAX_BODY_BYTES=%d: want %d to %d", c.MaxBodyBytes, MinMaxBodyBytes, MaxMaxBodyBytes))
	}
	if c.RiskSettleWindow < 0 || c.ReleaseSettleWindow < 0 {
		errs = append(errs, errors.New("INTENTGATE_RISK_SETTLE_WINDOW and INTENTGATE_RELEASE_SETTLE_WINDOW must not be negative"))
	}
	return errors.Join(errs...)
}

// ValidateAuth checks what only the MCP endpoint needs: how callers are
// authenticated. The reconciler has no callers and skips it.
func (c Config) ValidateAuth() error {
	if c.TrustGatewayAuthorizer && c.JWKSURL == "" {
		return nil
	}
	if c.JWTIssuer == "" || c.JWKSURL == "" {
		return errors.New("INTENTGATE_JWT_ISSUER and INTENTGATE_JWKS_URL are required unless INTENTGATE_TRUST_GATEWAY_AUTHORIZER=true")
	}
	if err := absoluteURL(c.JWKSURL); err != nil {
		return fmt.Errorf("INTENTGATE_JWKS_URL: %w", err)
	}
	return nil
}

// maxScopeLength bounds INTENTGATE_REQUIRED_SCOPE, as the template's
// GatewayRequiredScope does (the environment must fit Lambda's 4 KB).
const maxScopeLength = 64

// validScope: empty, or one RFC 6749 scope-token (%x21 / %x23-5B /
// %x5D-7E): what a token's space-separated scope claim can carry.
func validScope(s string) bool {
	if len(s) > maxScopeLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// validStage and maxStageLength bound the Stage dimension value: short,
// no spaces, so it fits CloudWatch dimension values and resource names
// alike: a letter or digit, then letters, digits, '.', '_' or '-'. Checked
// character by character, as every configuration value here: a regular
// expression compiled at package init cost every cold start.
func validStage(s string) bool {
	if s == "" || len(s) > maxStageLength || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

const maxStageLength = 64

// validSSMName is SSM's parameter-name alphabet, as a path: an optional
// leading '/', then segments of letters, digits, '_', '.' and '-' joined
// by single '/'. The name is used as is in the GetParameter call and in
// the template's IAM ARN (leading '/').
func validSSMName(s string) bool {
	s = strings.TrimPrefix(s, "/")
	if s == "" {
		return false
	}
	for segment := range strings.SplitSeq(s, "/") {
		if segment == "" {
			return false
		}
		for i := 0; i < len(segment); i++ {
			if c := segment[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
				return false
			}
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func absoluteURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}

// envReader collects every parse error instead of stopping at the first.
// DefaultClockSkewBound is INTENTGATE_CLOCK_SKEW_BOUND's default. Lambda
// and the reconciler read NTP-disciplined clocks (milliseconds apart); the
// bound is mostly for the provider's clock, which we do not control. It
// delays the proof of a ticket's absence by as much, never its success.
const DefaultClockSkewBound = 10 * time.Second

// MaxClockSkewBound caps the setting: every lease expiry and commit
// deadline waits this much longer, so a typo must not stall reconciliation.
const MaxClockSkewBound = 5 * time.Minute

type envReader struct {
	lookup Lookup
	errs   []error
}

func (e *envReader) str(name, def string) string {
	if v, ok := e.lookup(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// origins reads a comma-separated list of web origins, each checked the
// way the Origin guard will use it.
func (e *envReader) origins(name string) []string {
	var out []string
	for _, o := range strings.Split(e.str(name, ""), ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		if err := mcpserver.CheckOrigin(o); err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		out = append(out, o)
	}
	return out
}

func (e *envReader) dur(name string, def time.Duration) time.Duration {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a duration like 2s or 150ms", name, v))
		return def
	}
	return d
}

func (e *envReader) integer(name string, def int) int {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want an integer", name, v))
		return def
	}
	return n
}

// logLevel reads Lambda's level names (TRACE, DEBUG, INFO, WARN, ERROR,
// FATAL); TRACE maps to DEBUG and FATAL to ERROR, slog's nearest.
func (e *envReader) logLevel(name string, def slog.Level) slog.Level {
	v := strings.ToUpper(e.str(name, ""))
	switch v {
	case "":
		return def
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "INFO":
		return slog.LevelInfo
	case "WARN":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	}
	e.errs = append(e.errs, fmt.Errorf("%s=%q: want DEBUG, INFO, WARN or ERROR", name, v))
	return def
}

func (e *envReader) boolean(name string, def bool) bool {
	v := e.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want true or false", name, v))
		return def
	}
	return b
}
