package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ClientConfig selects the DynamoDB-compatible engine. An empty Endpoint
// means the SDK's own resolution (real AWS with the ambient credentials).
type ClientConfig struct {
	Endpoint string // INTENTGATE_DYNAMODB_ENDPOINT: moto, LocalStack, or empty for AWS
	Region   string // AWS_REGION; defaults to us-east-1
}

// LoadAWSConfig loads the AWS configuration that reaches the engine cc
// names. With an endpoint override, static dummy credentials are used,
// because local engines accept any signature but the SDK refuses to sign
// without one.
func LoadAWSConfig(ctx context.Context, cc ClientConfig) (aws.Config, error) {
	region := cc.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region)}
	if cc.Endpoint != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.NewCredentialsCache(
			credentials.NewStaticCredentialsProvider("local", "local", ""))))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// NewClient builds a DynamoDB client for the engine cc names
// (LoadAWSConfig).
func NewClient(ctx context.Context, cc ClientConfig) (*dynamodb.Client, error) {
	cfg, err := LoadAWSConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if cc.Endpoint != "" {
			o.BaseEndpoint = aws.String(cc.Endpoint)
		}
		// See httpbody.go: without it a write that took effect can come
		// back refused after the SDK's retry.
		o.HTTPClient = ClosedBodySafeHTTPClient(o.HTTPClient)
	}), nil
}
