package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
)

// minimalEnv is the least a valid configuration needs.
func minimalEnv() map[string]string {
	return map[string]string{"INTENTGATE_RISK_API_URL": "https://risk.example.internal"}
}

func TestFromEnvReadsEveryDocumentedVariable(t *testing.T) {
	env := map[string]string{
		"INTENTGATE_TABLE":                     "ops",
		"INTENTGATE_DYNAMODB_ENDPOINT":         "http://127.0.0.1:4566",
		"INTENTGATE_SSM_ENDPOINT":              "http://127.0.0.1:4567",
		"AWS_REGION":                           "eu-west-1",
		"INTENTGATE_RETENTION":                 "720h",
		"INTENTGATE_STAGE":                     "prod",
		"INTENTGATE_RESOURCE_URL":              "https://mcp.example.com/mcp",
		"INTENTGATE_JWT_ISSUER":                "https://auth.example.com",
		"INTENTGATE_JWKS_URL":                  "https://auth.example.com/jwks",
		"INTENTGATE_JWT_AUDIENCE":              "https://aud.example.com",
		"INTENTGATE_TRUST_GATEWAY_AUTHORIZER":  "true",
		"INTENTGATE_RISK_API_URL":              "https://risk.example.internal",
		"INTENTGATE_RISK_API_KEY":              "rk",
		"INTENTGATE_RISK_API_KEY_PARAMETER":    "/intentgate/prod/risk-api-key",
		"INTENTGATE_RISK_SETTLE_WINDOW":        "3s",
		"INTENTGATE_RELEASE_API_URL":           "https://release.example.internal",
		"INTENTGATE_RELEASE_API_KEY":           "lk",
		"INTENTGATE_RELEASE_API_KEY_PARAMETER": "/intentgate/prod/release-api-key",
		"INTENTGATE_RELEASE_SETTLE_WINDOW":     "7s",
		"INTENTGATE_RELEASE_COMMIT_DEADLINE":   "false",
		"INTENTGATE_CLOCK_SKEW_BOUND":          "25s",
		"INTENTGATE_DEPLOY_GRANTS":             "team-payments=payments-api,orders-api;team-web=web",
		"INTENTGATE_OPERATOR":                  "payments-oncall",
		"INTENTGATE_MAX_IN_FLIGHT":             "1",
		"INTENTGATE_MAX_QUEUE":                 "0",
		"INTENTGATE_MAX_QUEUE_WAIT":            "250ms",
		"INTENTGATE_DOWNSTREAM_MAX_CONNS":      "3",
		"INTENTGATE_DUE_SHARDS":                "8",
		"INTENTGATE_DUE_SHARDS_SWEPT":          "32",
		"INTENTGATE_BUDGET_AUTH":               "1s",
		"INTENTGATE_BUDGET_STORE":              "2s",
		"INTENTGATE_BUDGET_DOWNSTREAM":         "9s",
		"INTENTGATE_BUDGET_RESERVE":            "500ms",
		"INTENTGATE_LISTEN_ADDR":               "127.0.0.1:9090",
		"INTENTGATE_TRACING":                   "false",
		"INTENTGATE_MAX_BODY_BYTES":            "131072",
		"INTENTGATE_TASK_ID_KEY_PARAMETER":     "/intentgate/prod/task-id-key",
		"INTENTGATE_REQUIRED_SCOPE":            "intentgate.write",
	}
	cfg, err := FromEnv(mapLookup(env))
	require.NoError(t, err)
	assert.Equal(t, "intentgate.write", cfg.RequiredScope)
	assert.Equal(t, Config{
		Table: "ops", DynamoDBEndpoint: "http://127.0.0.1:4566", SSMEndpoint: "http://127.0.0.1:4567",
		Region: "eu-west-1", Retention: 720 * time.Hour, Stage: "prod",
		ResourceURL: "https://mcp.example.com/mcp", JWTIssuer: "https://auth.example.com",
		JWKSURL: "https://auth.example.com/jwks", JWTAudience: "https://aud.example.com", TrustGatewayAuthorizer: true, RequiredScope: "intentgate.write",
		RiskAPIURL: "https://risk.example.internal", RiskAPIKey: "rk", RiskAPIKeyParameter: "/intentgate/prod/risk-api-key",
		RiskSettleWindow: 3 * time.Second,
		ReleaseAPIURL:    "https://release.example.internal", ReleaseAPIKey: "lk",
		ReleaseAPIKeyParameter: "/intentgate/prod/release-api-key", ReleaseSettleWindow: 7 * time.Second, ReleaseCommitDeadline: false, ClockSkewBound: 25 * time.Second,
		DeployGrants: "team-payments=payments-api,orders-api;team-web=web", Operator: "payments-oncall",
		MaxInFlight: 1, MaxQueue: 0, MaxQueueWait: 250 * time.Millisecond, DownstreamMaxConns: 3,
		DueShards: 8, SweptDueShards: 32,
		Budget:     admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: 9 * time.Second, Reserve: 500 * time.Millisecond},
		ListenAddr: "127.0.0.1:9090", Tracing: false, MaxBodyBytes: 128 << 10,
		TaskIDKeyParameter: "/intentgate/prod/task-id-key",
	}, cfg)
}

func TestFromEnvDefaults(t *testing.T) {
	cfg, err := FromEnv(mapLookup(minimalEnv()))
	require.NoError(t, err)
	assert.Equal(t, "dev", cfg.Stage)
	assert.Equal(t, "intentgate-operations", cfg.Table)
	assert.Equal(t, "http://127.0.0.1:8080/mcp", cfg.ResourceURL)
	assert.Equal(t, cfg.ResourceURL, cfg.JWTAudience, "audience defaults to the resource")
	assert.Empty(t, cfg.SSMEndpoint, "no endpoint: AWS")
	assert.Equal(t, cfg.MaxInFlight, cfg.DownstreamMaxConns)
	assert.False(t, cfg.Tracing, "tracing is on by default only under Lambda")
	assert.EqualValues(t, 32<<10, cfg.MaxBodyBytes)
	assert.Equal(t, 16, cfg.DueShards)
	assert.Equal(t, cfg.DueShards, cfg.SweptDueShards, "the sweep covers what is written")

	env := minimalEnv()
	env["INTENTGATE_DYNAMODB_ENDPOINT"] = "http://127.0.0.1:5000"
	env["INTENTGATE_DOWNSTREAM_TIMEOUT"] = "4s"
	env["AWS_LAMBDA_FUNCTION_NAME"] = "intentgate-dev-mcp"
	cfg, err = FromEnv(mapLookup(env))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:5000", cfg.SSMEndpoint, "SSM follows the local engine")
	assert.Equal(t, 4*time.Second, cfg.Budget.Downstream, "INTENTGATE_DOWNSTREAM_TIMEOUT is the downstream budget")
	assert.True(t, cfg.Tracing)
}

func TestFromEnvRefusesMalformedValues(t *testing.T) {
	tests := []struct {
		name, key, value string
	}{
		{"duration", "INTENTGATE_MAX_QUEUE_WAIT", "soon"},
		{"downstream timeout", "INTENTGATE_DOWNSTREAM_TIMEOUT", "10"},
		{"retention", "INTENTGATE_RETENTION", "90d"},
		{"integer", "INTENTGATE_MAX_IN_FLIGHT", "one"},
		{"zero in flight", "INTENTGATE_MAX_IN_FLIGHT", "0"},
		{"negative queue", "INTENTGATE_MAX_QUEUE", "-1"},
		{"zero conns", "INTENTGATE_DOWNSTREAM_MAX_CONNS", "0"},
		{"zero due shards", "INTENTGATE_DUE_SHARDS", "0"},
		{"too many due shards", "INTENTGATE_DUE_SHARDS", "257"},
		{"sweep covers fewer shards than written", "INTENTGATE_DUE_SHARDS_SWEPT", "4"},
		{"boolean", "INTENTGATE_TRUST_GATEWAY_AUTHORIZER", "yes please"},
		{"tracing", "INTENTGATE_TRACING", "maybe"},
		{"relative resource url", "INTENTGATE_RESOURCE_URL", "/mcp"},
		{"risk url scheme", "INTENTGATE_RISK_API_URL", "ftp://risk"},
		{"release url", "INTENTGATE_RELEASE_API_URL", "release.example.internal"},
		{"stage with space", "INTENTGATE_STAGE", "my stage"},
		{"overlong stage", "INTENTGATE_STAGE", strings.Repeat("s", 65)},
		{"risk parameter name", "INTENTGATE_RISK_API_KEY_PARAMETER", "/intentgate/dev/risk key"},
		{"release parameter name", "INTENTGATE_RELEASE_API_KEY_PARAMETER", "//double"},
		{"ssm endpoint", "INTENTGATE_SSM_ENDPOINT", "localhost:4566"},
		{"dynamodb endpoint", "INTENTGATE_DYNAMODB_ENDPOINT", "localhost:4566"},
		{"deploy grants", "INTENTGATE_DEPLOY_GRANTS", "team-payments"},
		{"negative settle window", "INTENTGATE_RISK_SETTLE_WINDOW", "-1s"},
		{"budget", "INTENTGATE_BUDGET_AUTH", "0s"},
		{"body cap below a resolution", "INTENTGATE_MAX_BODY_BYTES", "16383"},
		{"body cap above 256 KiB", "INTENTGATE_MAX_BODY_BYTES", "262145"},
		{"body cap not a number", "INTENTGATE_MAX_BODY_BYTES", "64k"},
		{"short task id key", "INTENTGATE_TASK_ID_KEY", "too-short-to-be-a-key"},
		{"short previous task id key", "INTENTGATE_TASK_ID_KEY", strings.Repeat("k", 32) + " too-short-to-be-a-key"},
		{"task id key twice", "INTENTGATE_TASK_ID_KEY", strings.Repeat("k", 32) + "\n" + strings.Repeat("k", 32)},
		{"task id key parameter name", "INTENTGATE_TASK_ID_KEY_PARAMETER", "/intentgate/dev/task id key"},
		{"two scopes", "INTENTGATE_REQUIRED_SCOPE", "intentgate.read intentgate.write"},
		{"scope with a quote", "INTENTGATE_REQUIRED_SCOPE", `intentgate"write`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := minimalEnv()
			env[tc.key] = tc.value
			_, err := FromEnv(mapLookup(env))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.key, "the error names the variable")
		})
	}
}

func TestClockSkewBoundDefaultsAndIsValidated(t *testing.T) {
	c, err := FromEnv(mapLookup(minimalEnv()))
	require.NoError(t, err)
	assert.Equal(t, DefaultClockSkewBound, c.ClockSkewBound)
	assert.True(t, c.ReleaseCommitDeadline, "the Release API contract promises a commit deadline by default")

	for _, bad := range []string{"-1s", "6m", "soon"} {
		env := minimalEnv()
		env["INTENTGATE_CLOCK_SKEW_BOUND"] = bad
		_, err := FromEnv(mapLookup(env))
		assert.ErrorContains(t, err, "INTENTGATE_CLOCK_SKEW_BOUND", bad)
	}
}

// The region is found where the SDK's config loader looks: AWS_REGION (set
// by Lambda), then AWS_DEFAULT_REGION (set by many shells and CI systems),
// then us-east-1. Ignoring AWS_DEFAULT_REGION would send a developer's
// writes to another region's table of the same name.
func TestFromEnvFindsTheRegionWhereTheSDKLooks(t *testing.T) {
	env := minimalEnv()
	cfg, err := FromEnv(mapLookup(env))
	require.NoError(t, err)
	assert.Equal(t, "us-east-1", cfg.Region)

	env["AWS_DEFAULT_REGION"] = "eu-central-1"
	cfg, err = FromEnv(mapLookup(env))
	require.NoError(t, err)
	assert.Equal(t, "eu-central-1", cfg.Region)

	env["AWS_REGION"] = "eu-west-1"
	cfg, err = FromEnv(mapLookup(env))
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", cfg.Region, "AWS_REGION wins")
}

// The Risk API's URL has no default: a start without it says the
// variable is required, not that "" is a malformed URL.
func TestAMissingRiskAPIURLIsReportedAsRequired(t *testing.T) {
	env := minimalEnv()
	delete(env, "INTENTGATE_RISK_API_URL")
	_, err := FromEnv(mapLookup(env))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INTENTGATE_RISK_API_URL is required")
	assert.NotContains(t, err.Error(), `"" is not`)
}
