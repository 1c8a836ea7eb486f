// Command mcp is the MCP Lambda function: API Gateway HTTP API (payload 2.0)
// events in, the MCP http.Handler's responses out. Not under Lambda, the
// same binary serves plain HTTP on INTENTGATE_LISTEN_ADDR.
//
// Build: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/lambdahttp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "intentgate mcp:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// No collection while the cold start builds its long-lived state and
	// answers its first request: nearly all of it survives, so cycles now
	// would only cost CPU, and restoring the collector before that first
	// answer started a full cycle inside it.
	gcPercent := debug.SetGCPercent(-1)
	restoreGC := func() { debug.SetGCPercent(gcPercent) }
	cfg, err := app.FromEnv(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	a, err := app.Build(ctx, cfg, app.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = a.Close(context.WithoutCancel(ctx)) }()
	h, err := a.Handler(ctx)
	if err != nil {
		return err
	}
	if lambdahttp.UnderLambda() {
		lambda.StartWithOptions(afterFirstAnswer(lambdahttp.Handler(h, a.LambdaOptions()), restoreGC), lambda.WithContext(ctx))
		return nil
	}
	restoreGC()
	a.Logger.Info("serving MCP over plain HTTP", "addr", cfg.ListenAddr, "resource", cfg.ResourceURL)
	return lambdahttp.Serve(h, a.LambdaOptions(), cfg.ListenAddr)
}

// afterFirstAnswer runs then once, after handle has answered its first
// invocation.
func afterFirstAnswer(handle lambdahttp.LambdaHandler, then func()) lambdahttp.LambdaHandler {
	var once sync.Once
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		defer once.Do(then)
		return handle(ctx, ev)
	}
}
