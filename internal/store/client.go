package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ClientConfig selects the DynamoDB-compatible engine. An empty Endpoint
// means real AWS, with the credentials in the environment.
type ClientConfig struct {
	Endpoint string // INTENTGATE_DYNAMODB_ENDPOINT: moto, LocalStack, or empty for AWS
	Region   string // AWS_REGION; defaults to us-east-1
}

// Environment variables holding the credentials for real AWS: the ones
// Lambda sets from the function's execution role.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// refuseUnreadSDKSettings refuses settings the SDK's config loader reads
// that change where requests go. LoadAWSConfig does not read them, so on
// real AWS it refuses them rather than ignore them: an operator who set
// AWS_USE_FIPS_ENDPOINT must not get the standard endpoint without a word.
// A value the loader would read as what LoadAWSConfig does anyway ("false";
// endpoint URLs under AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true) passes.
func refuseUnreadSDKSettings() error {
	refuse := func(name string) error {
		return fmt.Errorf("aws configuration: %s=%q is set, but intentgate builds its AWS clients without "+
			"the SDK's config loader and would not honour it; unset it (for a local engine set "+
			"INTENTGATE_DYNAMODB_ENDPOINT and INTENTGATE_SSM_ENDPOINT instead)", name, os.Getenv(name))
	}
	for _, name := range []string{"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"} {
		if v := os.Getenv(name); v != "" && !strings.EqualFold(v, "false") {
			return refuse(name)
		}
	}
	if strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		return nil
	}
	for _, name := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_SSM"} {
		if os.Getenv(name) != "" {
			return refuse(name)
		}
	}
	return nil
}

// EnvCABundle names a PEM file of the certificate authorities to trust
// instead of the system's, as the SDK's config loader reads it (a TLS
// inspecting proxy, a LocalStack with its own certificate).
const EnvCABundle = "AWS_CA_BUNDLE"

// withCABundle makes client trust exactly the certificates in the PEM file
// at path, as the SDK's loader does for AWS_CA_BUNDLE.
func withCABundle(client *awshttp.BuildableClient, path string) (*awshttp.BuildableClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("aws configuration: %s: %w", EnvCABundle, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("aws configuration: %s: %s holds no PEM certificate", EnvCABundle, path)
	}
	return client.WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	}), nil
}

// LoadAWSConfig builds the AWS configuration that reaches the engine cc
// names. With an endpoint override, static dummy credentials are used,
// because local engines accept any signature but the SDK refuses to sign
// without one. Without one, the credentials are the environment's, which
// is where Lambda puts the execution role's.
//
// It deliberately does not use the SDK's shared-config loader
// (aws-sdk-go-v2/config): linking it brings the STS, SSO, SSO OIDC and
// sign-in clients and their package init, and running it reads the shared
// config files, together about a fifth of the MCP function's cold-start
// CPU, for credential sources a Lambda function never uses. Elsewhere,
// export the credentials into the environment (for a profile:
// eval "$(aws configure export-credentials --format env)"), or embed the
// application with a client built from a config of your own.
func LoadAWSConfig(_ context.Context, cc ClientConfig) (aws.Config, error) {
	region := cc.Region
	if region == "" {
		region = "us-east-1"
	}
	// The SDK's own default client, as its config loader would set it:
	// NewClient and the app wrap it (ClosedBodySafeHTTPClient).
	client := awshttp.NewBuildableClient()
	if path := os.Getenv(EnvCABundle); path != "" {
		var err error
		if client, err = withCABundle(client, path); err != nil {
			return aws.Config{}, err
		}
	}
	cfg := aws.Config{Region: region, HTTPClient: client}
	if cc.Endpoint != "" {
		cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("local", "local", ""))
		return cfg, nil
	}
	if err := refuseUnreadSDKSettings(); err != nil {
		return aws.Config{}, err
	}
	keyID, secret := os.Getenv(EnvAccessKeyID), os.Getenv(EnvSecretAccessKey)
	if keyID == "" || secret == "" {
		return aws.Config{}, fmt.Errorf("aws credentials: %s and %s must be set for real AWS "+
			"(Lambda sets them from the execution role; elsewhere export them, e.g. "+
			`eval "$(aws configure export-credentials --format env)"), or set an endpoint for a local engine`,
			EnvAccessKeyID, EnvSecretAccessKey)
	}
	cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(keyID, secret, os.Getenv(EnvSessionToken)))
	return cfg, nil
}

// NewClient builds a DynamoDB client for the engine cc names
// (LoadAWSConfig).
func NewClient(ctx context.Context, cc ClientConfig) (*dynamodb.Client, error) {
	cfg, err := LoadAWSConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, ClientOptions(cc.Endpoint)), nil
}

// ClientOptions are the settings of every DynamoDB client of ours: the
// engine's endpoint when it is not AWS's (empty: AWS's), the HTTP client
// that keeps a retried write's body whole, and the retries.
func ClientOptions(endpoint string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		// See httpbody.go: without it a write that took effect can come
		// back refused after the SDK's retry.
		o.HTTPClient = ClosedBodySafeHTTPClient(o.HTTPClient)
		// Stated here, not left to the linked client version: what the
		// SDK's DynamoDB client defaults to from v1.74 on (4 attempts, a
		// 25 ms base backoff). go.mod pins an earlier client, whose
		// serializers cost no package init (docs/deploy.md, Cold start).
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 4
			so.BaseDelay = 25 * time.Millisecond
		})
	}
}
