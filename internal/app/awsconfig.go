package app

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/store"
)

// loadAWSConfig loads the one aws.Config every AWS client of the process
// (DynamoDB, SSM) is built from: one credential chain and region lookup at
// cold start, and, with tracing on, one X-Ray instrumentation so each SDK
// call made inside a traced invocation is a subsegment of its trace. Any
// endpoint override (moto, LocalStack) means a local engine, which gets the
// store's dummy credentials.
func loadAWSConfig(ctx context.Context, cfg Config, tracer *obs.Tracer) (aws.Config, error) {
	local := cfg.DynamoDBEndpoint
	if local == "" {
		local = cfg.SSMEndpoint
	}
	awsCfg, err := store.LoadAWSConfig(ctx, store.ClientConfig{Endpoint: local, Region: cfg.Region})
	if err != nil {
		return aws.Config{}, err
	}
	tracer.InstrumentAWS(&awsCfg.APIOptions)
	return awsCfg, nil
}
