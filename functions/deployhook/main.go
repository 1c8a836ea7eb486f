// Command deployhook is the CodeDeploy PreTraffic hook of both functions
// (internal/deployhook): it invokes the version being deployed once with its
// probe event and reports the verdict to CodeDeploy.
//
// Build: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	codedeploytypes "github.com/aws/aws-sdk-go-v2/service/codedeploy/types"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/intentgate/intentgate/internal/deployhook"
	"github.com/intentgate/intentgate/internal/store"
)

func main() {
	hook, err := build(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "intentgate deployhook:", err)
		os.Exit(1)
	}
	lambda.Start(hook.Handle)
}

func build(ctx context.Context) (deployhook.Hook, error) {
	target, probe, err := deployhook.Config(os.LookupEnv)
	if err != nil {
		return deployhook.Hook{}, fmt.Errorf("configuration: %w", err)
	}
	cfg, err := store.LoadAWSConfig(ctx, store.ClientConfig{Region: os.Getenv("AWS_REGION")})
	if err != nil {
		return deployhook.Hook{}, err
	}
	return deployhook.Hook{
		Target:   target,
		Probe:    probe,
		Invoker:  invoker{awslambda.NewFromConfig(cfg)},
		Reporter: reporter{codedeploy.NewFromConfig(cfg)},
		Logger:   slog.New(slog.NewJSONHandler(os.Stdout, nil)),
	}, nil
}

type invoker struct{ client *awslambda.Client }

func (i invoker) Invoke(ctx context.Context, target string, payload []byte) ([]byte, string, error) {
	out, err := i.client.Invoke(ctx, &awslambda.InvokeInput{
		FunctionName:   aws.String(target),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, "", err
	}
	return out.Payload, aws.ToString(out.FunctionError), nil
}

type reporter struct{ client *codedeploy.Client }

func (r reporter) Report(ctx context.Context, deploymentID, executionID string, succeeded bool) error {
	status := codedeploytypes.LifecycleEventStatusFailed
	if succeeded {
		status = codedeploytypes.LifecycleEventStatusSucceeded
	}
	_, err := r.client.PutLifecycleEventHookExecutionStatus(ctx, &codedeploy.PutLifecycleEventHookExecutionStatusInput{
		DeploymentId:                  aws.String(deploymentID),
		LifecycleEventHookExecutionId: aws.String(executionID),
		Status:                        status,
	})
	return err
}
