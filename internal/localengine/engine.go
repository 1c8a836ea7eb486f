// Package localengine starts and reaches a DynamoDB-compatible engine: the
// local moto engine (infra/engine/moto_server.py, started as a child
// process) by default, or the engine named by the environment:
//
//	INTENTGATE_DYNAMODB_ENDPOINT=http://localhost:4566  LocalStack or any endpoint (Kind "external" unless INTENTGATE_ENGINE_KIND says otherwise)
//	INTENTGATE_ENGINE_KIND=dynamodb                      real DynamoDB with the credentials in the environment (store.LoadAWSConfig)
//
// The local stack (infra/devstack, `make run`), the chaos campaign and the
// engine benchmark use it directly; tests reach it through
// internal/enginetest, which adds per-test tables and a TestMain helper.
package localengine

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/intentgate/intentgate/internal/store"
)

// Environment variables that select the engine.
const (
	EnvEndpoint = "INTENTGATE_DYNAMODB_ENDPOINT"
	EnvKind     = "INTENTGATE_ENGINE_KIND"
	EnvRegion   = "AWS_REGION"
)

// Engine kinds. Any other INTENTGATE_ENGINE_KIND value (e.g. "localstack")
// is passed through as the Kind of an external endpoint.
const (
	KindMoto     = "moto"     // local moto engine started by this package
	KindExternal = "external" // INTENTGATE_DYNAMODB_ENDPOINT without a kind
	KindDynamoDB = "dynamodb" // real DynamoDB (no endpoint override)
)

// Engine is one DynamoDB-compatible engine used by a process.
type Engine struct {
	endpoint string
	kind     string
	region   string
	proc     *motoProcess // nil unless this package started the engine
}

// Start returns the engine the environment selects, starting the local moto
// engine when none is configured. ctx bounds only the start-up; the engine
// runs until Stop (or until the process that started it dies).
func Start(ctx context.Context) (*Engine, error) {
	endpoint := os.Getenv(EnvEndpoint)
	kind := os.Getenv(EnvKind)
	region := os.Getenv(EnvRegion)
	switch {
	case endpoint != "":
		if kind == "" {
			kind = KindExternal
		}
		return &Engine{endpoint: strings.TrimRight(endpoint, "/"), kind: kind, region: region}, nil
	case kind == KindDynamoDB:
		return &Engine{kind: KindDynamoDB, region: region}, nil
	case kind == "" || kind == KindMoto:
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		proc, err := startMoto(ctx, root)
		if err != nil {
			return nil, err
		}
		return &Engine{endpoint: proc.endpoint, kind: KindMoto, region: region, proc: proc}, nil
	default:
		return nil, fmt.Errorf("%s=%q needs %s (only %q and %q need no endpoint)",
			EnvKind, kind, EnvEndpoint, KindMoto, KindDynamoDB)
	}
}

// StartMoto starts a local moto engine whatever the environment says, with
// extra launcher arguments (infra/engine/moto_server.py --help), e.g.
// "--stock-transactions" for stock moto's TransactWriteItems. Tests that
// compare engine variants use it; everything else uses Start.
func StartMoto(ctx context.Context, launcherArgs ...string) (*Engine, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	proc, err := startMoto(ctx, root, launcherArgs...)
	if err != nil {
		return nil, err
	}
	return &Engine{endpoint: proc.endpoint, kind: KindMoto, region: os.Getenv(EnvRegion), proc: proc}, nil
}

// Endpoint is the engine's base URL; empty for real DynamoDB.
func (e *Engine) Endpoint() string { return e.endpoint }

// Kind is KindMoto, KindDynamoDB, KindExternal or the INTENTGATE_ENGINE_KIND
// given with an endpoint.
func (e *Engine) Kind() string { return e.kind }

// Region is the AWS_REGION in force, or empty (the store defaults it).
func (e *Engine) Region() string { return e.region }

// ClientConfig is the store configuration that reaches this engine.
func (e *Engine) ClientConfig() store.ClientConfig {
	return store.ClientConfig{Endpoint: e.endpoint, Region: e.region}
}

// Client builds a DynamoDB client for this engine exactly the way the
// store does (store.NewClient).
func (e *Engine) Client(ctx context.Context) (*dynamodb.Client, error) {
	c, err := store.NewClient(ctx, e.ClientConfig())
	if err != nil {
		return nil, fmt.Errorf("engine client: %w", err)
	}
	return c, nil
}

// StreamsClient builds a DynamoDB Streams client for this engine, configured
// like Client (same endpoint, region and credentials).
func (e *Engine) StreamsClient(ctx context.Context) (*dynamodbstreams.Client, error) {
	cfg, err := store.LoadAWSConfig(ctx, e.ClientConfig())
	if err != nil {
		return nil, fmt.Errorf("engine streams client: %w", err)
	}
	return dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if e.endpoint != "" {
			o.BaseEndpoint = aws.String(e.endpoint)
		}
		o.HTTPClient = store.ClosedBodySafeHTTPClient(o.HTTPClient)
	}), nil
}

// Reset empties every table of a moto engine (POST /moto-api/reset); on other
// engines it does nothing. It affects every user of the engine, so call
// it only while nothing else uses it.
func (e *Engine) Reset(ctx context.Context) error {
	if e.kind != KindMoto {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint+"/moto-api/reset", nil)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reset moto: status %s", resp.Status)
	}
	return nil
}

// Exited is closed when the engine process this package started has ended,
// by Stop or by itself (killed, out of memory, a crash); for engines it did
// not start it is nil, which never becomes ready in a select.
func (e *Engine) Exited() <-chan struct{} {
	if e.proc == nil {
		return nil
	}
	return e.proc.exited
}

// ExitError says how the engine process ended, with the last of its
// stderr; nil while it runs or when this package did not start it.
func (e *Engine) ExitError() error {
	if e.proc == nil {
		return nil
	}
	select {
	case <-e.proc.exited:
	default:
		return nil
	}
	status := "exit status 0"
	if e.proc.waitErr != nil {
		status = e.proc.waitErr.Error()
	}
	if tail := e.proc.tail.String(); tail != "" {
		return fmt.Errorf("engine exited (%s): %s", status, tail)
	}
	return fmt.Errorf("engine exited (%s)", status)
}

// Stop ends the engine process this package started and waits for it; for
// external engines it does nothing. Calling it again is harmless.
func (e *Engine) Stop() error {
	if e.proc == nil {
		return nil
	}
	return e.proc.stop()
}
