package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// engine serves DynamoDB and, being moto (or LocalStack), SSM on the same
// endpoint: the deployment's INTENTGATE_SSM_ENDPOINT default.
var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// engineConfig is a valid configuration against the test engine; the
// downstream URLs are never called by Build.
func engineConfig(t *testing.T, env map[string]string) Config {
	t.Helper()
	base := map[string]string{
		"INTENTGATE_TABLE": enginetest.TableName(t), "INTENTGATE_DYNAMODB_ENDPOINT": engine.Endpoint(),
		"AWS_REGION": engine.Region(), "INTENTGATE_RISK_API_URL": "http://127.0.0.1:1",
	}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := FromEnv(mapLookup(base))
	require.NoError(t, err)
	return cfg
}

// putSecureString stores a SecureString the way an operator would, through
// the same SSM client Build uses; removed at cleanup.
func putSecureString(t *testing.T, name, value string) {
	t.Helper()
	if engine.Endpoint() == "" {
		t.Skip("SSM tests need an endpoint engine (moto or LocalStack), not real AWS")
	}
	ctx := context.Background()
	awsCfg, err := loadAWSConfig(ctx, Config{SSMEndpoint: engine.Endpoint(), Region: engine.Region()}, nil)
	require.NoError(t, err)
	client := ssm.NewFromConfig(awsCfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(engine.Endpoint()) })
	_, err = client.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
}

func TestBuildResolvesBothAPIKeysFromSecureStrings(t *testing.T) {
	putSecureString(t, "/intentgate/test/risk-api-key", "risk-secret-1")
	putSecureString(t, "/intentgate/test/release-api-key", "release-secret-2")
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY_PARAMETER":    "/intentgate/test/risk-api-key",
		"INTENTGATE_RELEASE_API_URL":           "http://127.0.0.1:2",
		"INTENTGATE_RELEASE_API_KEY_PARAMETER": "/intentgate/test/release-api-key",
	})
	require.Empty(t, cfg.RiskAPIKey)
	require.Equal(t, engine.Endpoint(), cfg.SSMEndpoint, "SSM defaults to the DynamoDB endpoint")

	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)

	// Read without WithDecryption, moto answers "kms:alias/aws/ssm:<value>":
	// the exact value proves the decrypted read.
	assert.Equal(t, "risk-secret-1", a.Config.RiskAPIKey, "decrypted value of the SecureString")
	assert.Equal(t, "release-secret-2", a.Config.ReleaseAPIKey)
	assert.Contains(t, a.Families, release.ToolCreate, "families were built after the keys were resolved")
}

func TestBuildWithAMissingParameterFailsNamingIt(t *testing.T) {
	if engine.Endpoint() == "" {
		t.Skip("SSM tests need an endpoint engine")
	}
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY_PARAMETER": "/intentgate/test/does-not-exist",
	})

	_, err := Build(context.Background(), cfg, Options{Out: io.Discard})

	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolve INTENTGATE_RISK_API_KEY_PARAMETER")
	assert.Contains(t, err.Error(), "/intentgate/test/does-not-exist")
	var notFound *ssmtypes.ParameterNotFound
	assert.ErrorAs(t, err, &notFound, "the SDK error stays inspectable")
}

func TestRawKeyWinsOverParameterAndNeedsNoSSM(t *testing.T) {
	// The SSM endpoint points at a closed port: any call would fail.
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":           "raw-key",
		"INTENTGATE_RISK_API_KEY_PARAMETER": "/intentgate/test/never-read",
		"INTENTGATE_SSM_ENDPOINT":           "http://127.0.0.1:1",
	})
	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)
	assert.Equal(t, "raw-key", a.Config.RiskAPIKey)
}

func TestReleaseKeyIsNotReadWithoutTheReleaseAPI(t *testing.T) {
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":              "raw-key",
		"INTENTGATE_RELEASE_API_KEY_PARAMETER": "/intentgate/test/never-read",
		"INTENTGATE_SSM_ENDPOINT":              "http://127.0.0.1:1",
	})
	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)
	assert.Empty(t, a.Config.ReleaseAPIKey)
	assert.NotContains(t, a.Families, release.ToolCreate)
}

// The MCP Tasks id key has no raw source on Lambda: the MCP function reads
// it from its SecureString at cold start, like the provider keys.
func TestBuildResolvesTheTaskIDKeyFromItsSecureString(t *testing.T) {
	key := strings.Repeat("t", 40)
	putSecureString(t, "/intentgate/test/task-id-key", key)
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":          "raw-key",
		"INTENTGATE_TASK_ID_KEY_PARAMETER": "/intentgate/test/task-id-key",
	})
	require.Empty(t, cfg.TaskIDKey)

	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)
	assert.Equal(t, key, a.Config.TaskIDKey, "decrypted value of the SecureString")
}

func TestTaskIDKeyTooShortInItsSecureStringFailsTheColdStart(t *testing.T) {
	putSecureString(t, "/intentgate/test/short-task-id-key", "short")
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":          "raw-key",
		"INTENTGATE_TASK_ID_KEY_PARAMETER": "/intentgate/test/short-task-id-key",
	})
	_, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INTENTGATE_TASK_ID_KEY_PARAMETER")
	assert.Contains(t, err.Error(), "/intentgate/test/short-task-id-key")
	assert.Contains(t, err.Error(), "at least 32 bytes")
	assert.NotContains(t, err.Error(), "short\"", "the value never goes into an error")
}

func TestRawTaskIDKeyWinsOverItsParameterAndNeedsNoSSM(t *testing.T) {
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":          "raw-key",
		"INTENTGATE_TASK_ID_KEY":           strings.Repeat("r", 32),
		"INTENTGATE_TASK_ID_KEY_PARAMETER": "/intentgate/test/never-read",
		"INTENTGATE_SSM_ENDPOINT":          "http://127.0.0.1:1",
	})
	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("r", 32), a.Config.TaskIDKey)
}

func TestEmptySecureStringIsRefused(t *testing.T) {
	// SSM itself refuses empty values, so a fake reader stands in.
	_, err := readSecureString(context.Background(), emptyReader{}, "/intentgate/test/empty")
	assert.ErrorIs(t, err, errEmptyParameter)
	assert.Contains(t, err.Error(), "/intentgate/test/empty")
}

type emptyReader struct{}

func (emptyReader) GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String("")}}, nil
}

func mapLookup(env map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// The SSM client is built from the process's one aws.Config, so it carries
// the same X-Ray instrumentation as the DynamoDB client: a read made inside
// a traced invocation is an SSM subsegment (GetParameter) of its trace.
func TestSSMReadsShareTheTracedAWSConfig(t *testing.T) {
	putSecureString(t, "/intentgate/test/traced-key", "traced-secret")
	daemon, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = daemon.Close() })
	tracer, err := obs.NewTracer(obs.TracerConfig{Enabled: true, DaemonAddr: daemon.LocalAddr().(*net.UDPAddr)})
	require.NoError(t, err)
	cfg := engineConfig(t, map[string]string{"INTENTGATE_RISK_API_KEY_PARAMETER": "/intentgate/test/traced-key"})
	awsCfg, err := loadAWSConfig(context.Background(), cfg, tracer)
	require.NoError(t, err)

	ctx := context.WithValue(context.Background(), obs.LambdaTraceHeaderKey, //nolint:staticcheck // aws-lambda-go's key is a string
		"Root=1-6a8861ec-3c1f0e7d9b2a4c5e6f708194;Parent=53995c3f42cd8ad8;Sampled=1")
	got, err := resolveAPIKeys(ctx, cfg, awsCfg)
	require.NoError(t, err)
	require.Equal(t, "traced-secret", got.RiskAPIKey)

	buf := make([]byte, 64<<10)
	require.NoError(t, daemon.SetReadDeadline(time.Now().Add(10*time.Second))) // a safety net, not a timing check
	n, _, err := daemon.ReadFromUDP(buf)
	require.NoError(t, err)
	_, body, _ := strings.Cut(string(buf[:n]), "\n")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, "SSM", doc["name"])
	assert.Equal(t, "1-6a8861ec-3c1f0e7d9b2a4c5e6f708194", doc["trace_id"])
	assert.Equal(t, "GetParameter", doc["aws"].(map[string]any)["operation"])
	assert.NotContains(t, body, "traced-secret", "the secret never enters a trace")
}

// A rotation writes "new old" into the parameter: the instances it starts
// mint under the new key and still verify ids minted under the old one.
func TestATaskIDKeyParameterMayCarryThePreviousKeyForARotation(t *testing.T) {
	oldKey, newKey := strings.Repeat("o", 32), strings.Repeat("n", 44)
	putSecureString(t, "/intentgate/test/rotated-task-id-key", newKey+"\n"+oldKey+"\n")
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":          "raw-key",
		"INTENTGATE_TASK_ID_KEY_PARAMETER": "/intentgate/test/rotated-task-id-key",
	})
	a, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.NoError(t, err)

	ids, err := a.taskIDs()
	require.NoError(t, err)
	before, err := tasks.NewIDs([]byte(oldKey))
	require.NoError(t, err)
	after, err := tasks.NewIDs([]byte(newKey))
	require.NoError(t, err)
	handle := "op_" + strings.Repeat("c", 26)
	at := time.Date(2026, 12, 4, 5, 0, 0, 1, time.UTC)
	_, ok := ids.Parse(before.For(handle, at))
	assert.True(t, ok, "an id minted before the rotation still verifies")
	_, ok = after.Parse(ids.For(handle, at))
	assert.True(t, ok, "new ids are minted under the first key")
}

func TestAShortPreviousTaskIDKeyInItsSecureStringFailsTheColdStart(t *testing.T) {
	putSecureString(t, "/intentgate/test/short-previous-task-id-key", strings.Repeat("n", 32)+" shortold")
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY":          "raw-key",
		"INTENTGATE_TASK_ID_KEY_PARAMETER": "/intentgate/test/short-previous-task-id-key",
	})
	_, err := Build(context.Background(), cfg, Options{Out: io.Discard})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/intentgate/test/short-previous-task-id-key")
	assert.Contains(t, err.Error(), "key 2 of 2")
	assert.NotContains(t, err.Error(), "shortold", "the value never goes into an error")
}
