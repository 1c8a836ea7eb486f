// Command reconciler is the reconciler Lambda: DynamoDB stream batches
// (operations entering UNKNOWN or RETRYABLE) and the scheduled sweep of the
// due index, both handed to internal/reconcile. It is wired by internal/app,
// exactly like the MCP function, so both run the same families and budgets.
//
// Build: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/reconcile"
)

func main() {
	r, err := build(context.Background(), os.LookupEnv, app.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "intentgate reconciler:", err)
		os.Exit(1)
	}
	lambda.Start(r.handle)
}

// reconciler is the function's state across invocations: clients and
// configuration only, nothing correctness depends on.
type reconciler struct {
	app     *app.App
	svc     *reconcile.Service
	auditor *obs.Auditor
	metrics *obs.Metrics
}

func build(ctx context.Context, lookup app.Lookup, opts app.Options) (*reconciler, error) {
	cfg, err := app.FromEnv(lookup)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	a, err := app.Build(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	svc, err := a.Reconciler()
	if err != nil {
		return nil, err
	}
	return &reconciler{app: a, svc: svc, auditor: a.Auditor, metrics: a.Metrics}, nil
}
