package app

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/intentgate/intentgate/internal/obs"
)

// loadAWSConfig loads the one aws.Config every AWS client of the process
// (DynamoDB, SSM) is built from: one credential chain and region lookup at
// cold start, and, with tracing on, one X-Ray instrumentation so each SDK
// call made inside a traced invocation is a subsegment of its trace. With an endpoint override
// (moto, LocalStack) and no credentials in the environment, static dummy
// credentials are used: local engines accept any signature, but the SDK
// refuses to sign without one.
func loadAWSConfig(ctx context.Context, cfg Config, tracer *obs.Tracer) (aws.Config, error) {
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region)}
	if cfg.DynamoDBEndpoint != "" || cfg.SSMEndpoint != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.NewCredentialsCache(
			credentials.NewStaticCredentialsProvider("local", "local", ""))))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	tracer.InstrumentAWS(&awsCfg.APIOptions)
	return awsCfg, nil
}
