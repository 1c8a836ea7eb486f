package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/intentgate/intentgate/internal/tasks"
)

// ssmCallTimeout bounds one GetParameter: secrets are read at cold start,
// inside Lambda's 10 s init phase.
const ssmCallTimeout = 5 * time.Second

// parameterReader is the one SSM call secrets need.
type parameterReader interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// resolveAPIKeys fills each downstream API key (and the MCP Tasks id key)
// that is empty but has an SSM parameter name, reading the SecureString
// decrypted. A raw key (INTENTGATE_*_API_KEY, INTENTGATE_TASK_ID_KEY) wins,
// so local runs need no SSM. The Release key is read only when the Release
// API is configured. No parameter to read
// means no client is built and no call is made.
func resolveAPIKeys(ctx context.Context, cfg Config, awsCfg aws.Config) (Config, error) {
	type want struct {
		env  string
		name string
		dst  *string
	}
	var todo []want
	if cfg.RiskAPIKey == "" && cfg.RiskAPIKeyParameter != "" {
		todo = append(todo, want{"INTENTGATE_RISK_API_KEY_PARAMETER", cfg.RiskAPIKeyParameter, &cfg.RiskAPIKey})
	}
	if cfg.ReleaseAPIURL != "" && cfg.ReleaseAPIKey == "" && cfg.ReleaseAPIKeyParameter != "" {
		todo = append(todo, want{"INTENTGATE_RELEASE_API_KEY_PARAMETER", cfg.ReleaseAPIKeyParameter, &cfg.ReleaseAPIKey})
	}
	if cfg.TaskIDKey == "" && cfg.TaskIDKeyParameter != "" {
		todo = append(todo, want{"INTENTGATE_TASK_ID_KEY_PARAMETER", cfg.TaskIDKeyParameter, &cfg.TaskIDKey})
	}
	if len(todo) == 0 {
		return cfg, nil
	}
	// The process's one aws.Config (loadAWSConfig): the same credentials,
	// region and tracing as the DynamoDB client.
	client := ssm.NewFromConfig(awsCfg, func(o *ssm.Options) {
		if cfg.SSMEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.SSMEndpoint)
		}
	})
	// Read at once: each is a network round trip inside the cold start. A
	// failure is reported for the first parameter in the order above.
	values, errs := make([]string, len(todo)), make([]error, len(todo))
	var wg sync.WaitGroup
	for i, w := range todo {
		wg.Go(func() { values[i], errs[i] = readSecureString(ctx, client, w.name) })
	}
	wg.Wait()
	for i, w := range todo {
		if errs[i] != nil {
			return Config{}, fmt.Errorf("resolve %s: %w", w.env, errs[i])
		}
		*w.dst = values[i]
	}
	// Validate saw no task id key yet when it comes from SSM.
	if cfg.TaskIDKey != "" {
		if _, err := tasks.Keys(cfg.TaskIDKey); err != nil {
			return Config{}, fmt.Errorf("resolve INTENTGATE_TASK_ID_KEY_PARAMETER: ssm parameter %s: %w (one key of at least 32 bytes, or the new and the previous one separated by white space, the same on every instance)", cfg.TaskIDKeyParameter, err)
		}
	}
	return cfg, nil
}

var errEmptyParameter = errors.New("parameter has no value")

// readSecureString reads one parameter, decrypted. The value never goes
// into an error or a log.
func readSecureString(ctx context.Context, client parameterReader, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ssmCallTimeout)
	defer cancel()
	out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("ssm GetParameter %s: %w", name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", fmt.Errorf("ssm parameter %s: %w", name, errEmptyParameter)
	}
	return aws.ToString(out.Parameter.Value), nil
}
