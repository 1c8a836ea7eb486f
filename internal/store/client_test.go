package store_test

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/store"
)

// On real AWS the credentials are the environment's, as Lambda sets them
// from the execution role; a local engine gets dummy ones.
func TestAWSConfigTakesRealCredentialsFromTheEnvironment(t *testing.T) {
	t.Setenv(store.EnvAccessKeyID, "AKIAEXAMPLE")
	t.Setenv(store.EnvSecretAccessKey, "secret")
	t.Setenv(store.EnvSessionToken, "token")
	cfg, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", cfg.Region)
	assert.NotNil(t, cfg.HTTPClient)
	creds, err := cfg.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "AKIAEXAMPLE", creds.AccessKeyID)
	assert.Equal(t, "secret", creds.SecretAccessKey)
	assert.Equal(t, "token", creds.SessionToken)

	local, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Endpoint: "http://127.0.0.1:8000"})
	require.NoError(t, err)
	assert.Equal(t, "us-east-1", local.Region, "the default region")
	creds, err = local.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "local", creds.AccessKeyID, "a local engine gets dummy credentials, whatever the environment holds")
}

// Without credentials in the environment the configuration fails at once,
// saying which variables to set, instead of every call failing to sign.
func TestAWSConfigWithoutCredentialsForRealAWSSaysWhatToSet(t *testing.T) {
	t.Setenv(store.EnvAccessKeyID, "")
	t.Setenv(store.EnvSecretAccessKey, "")
	_, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
	require.Error(t, err)
	assert.ErrorContains(t, err, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set")
	assert.ErrorContains(t, err, "aws configure export-credentials")
}

// The SDK's own config loader would honour these; LoadAWSConfig does not
// read them, so on real AWS it refuses them rather than silently sending
// traffic somewhere the operator did not mean (a non-FIPS endpoint, say).
func TestAWSConfigRefusesEndpointSettingsItDoesNotRead(t *testing.T) {
	for _, name := range []string{"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_SSM"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(store.EnvAccessKeyID, "AKIAEXAMPLE")
			t.Setenv(store.EnvSecretAccessKey, "secret")
			t.Setenv(name, "true")
			_, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
			require.Error(t, err)
			assert.ErrorContains(t, err, name)

			_, err = store.LoadAWSConfig(context.Background(), store.ClientConfig{Endpoint: "http://127.0.0.1:8000"})
			assert.NoError(t, err, "a local engine's endpoint is set by INTENTGATE_*_ENDPOINT; the SDK's settings do not matter there")
		})
	}
	// What the loader would read as "as intentgate does anyway" is accepted.
	for _, tc := range []struct{ name, value string }{
		{"AWS_USE_FIPS_ENDPOINT", ""}, {"AWS_USE_FIPS_ENDPOINT", "false"}, {"AWS_USE_DUALSTACK_ENDPOINT", "FALSE"},
	} {
		t.Run(tc.name+"="+tc.value+" is accepted", func(t *testing.T) {
			t.Setenv(store.EnvAccessKeyID, "AKIAEXAMPLE")
			t.Setenv(store.EnvSecretAccessKey, "secret")
			t.Setenv(tc.name, tc.value)
			_, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
			assert.NoError(t, err)
		})
	}
	t.Run("a value the loader would refuse is refused", func(t *testing.T) {
		t.Setenv(store.EnvAccessKeyID, "AKIAEXAMPLE")
		t.Setenv(store.EnvSecretAccessKey, "secret")
		t.Setenv("AWS_USE_FIPS_ENDPOINT", "yes")
		_, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
		assert.ErrorContains(t, err, "AWS_USE_FIPS_ENDPOINT")
	})
	t.Run("endpoint URLs the loader is told to ignore are accepted", func(t *testing.T) {
		t.Setenv(store.EnvAccessKeyID, "AKIAEXAMPLE")
		t.Setenv(store.EnvSecretAccessKey, "secret")
		t.Setenv("AWS_ENDPOINT_URL", "http://example.invalid")
		t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
		_, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Region: "eu-west-1"})
		assert.NoError(t, err)
	})
}

// AWS_CA_BUNDLE is honoured as the SDK's loader honours it: the client
// trusts exactly the bundle's certificates. A bundle that cannot be read
// fails the configuration, naming the variable.
func TestAWSConfigTrustsTheCABundleOfTheEnvironment(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))

	t.Setenv(store.EnvCABundle, bundle)
	cfg, err := store.LoadAWSConfig(context.Background(), store.ClientConfig{Endpoint: srv.URL})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	res, err := cfg.HTTPClient.Do(req)
	require.NoError(t, err, "the bundle's certificate is trusted")
	_ = res.Body.Close()

	t.Setenv(store.EnvCABundle, "")
	cfg, err = store.LoadAWSConfig(context.Background(), store.ClientConfig{Endpoint: srv.URL})
	require.NoError(t, err)
	_, err = cfg.HTTPClient.Do(req)
	require.Error(t, err, "without the bundle the test server's certificate is not trusted")

	t.Setenv(store.EnvCABundle, filepath.Join(t.TempDir(), "missing.pem"))
	_, err = store.LoadAWSConfig(context.Background(), store.ClientConfig{Endpoint: srv.URL})
	assert.ErrorContains(t, err, store.EnvCABundle)
}

// How often a DynamoDB call is tried is stated by us, not left to the
// linked client version's defaults: 4 attempts, as the SDK's DynamoDB
// client does from v1.74 on (go.mod pins an earlier one; docs/deploy.md,
// Cold start).
func TestDynamoDBCallsAreTriedFourTimesBeforeTheErrorIsReturned(t *testing.T) {
	var attempts atomic.Int32
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`)
	}))
	t.Cleanup(engine.Close)
	c, err := store.NewClient(context.Background(), store.ClientConfig{Endpoint: engine.URL})
	require.NoError(t, err)
	_, err = c.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}},
	})
	require.Error(t, err)
	assert.EqualValues(t, 4, attempts.Load())
}
