package store_test

import (
	"context"
	"testing"

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
