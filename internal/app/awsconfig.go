package app

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-xray-sdk-go/instrumentation/awsv2"
)

// loadAWSConfig loads the one aws.Config every AWS client of the process
// (DynamoDB, SSM) is built from: one credential chain and region lookup at
// cold start, and, with tracing on, one X-Ray instrumentation so each SDK
// call is a subsegment of the invocation's trace. With an endpoint override
// (moto, LocalStack) and no credentials in the environment, static dummy
// credentials are used: local engines accept any signature, but the SDK
// refuses to sign without one.
func loadAWSConfig(ctx context.Context, cfg Config) (aws.Config, error) {
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
	if cfg.Tracing {
		awsv2.AWSV2Instrumentor(&awsCfg.APIOptions)
	}
	return awsCfg, nil
}
