// Command mcp is the MCP Lambda function: API Gateway HTTP API (payload 2.0)
// events in, the MCP http.Handler's responses out. Not under Lambda, the
// same binary serves plain HTTP on INTENTGATE_LISTEN_ADDR.
//
// Build: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
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
	ctx, stop := runContext(lambdahttp.UnderLambda())
	defer stop()
	// No collection while the cold start builds its long-lived state and
	// answers its first request: nearly all of it survives, so cycles now
	// would only cost CPU, and restoring the collector before that first
	// answer started a full cycle inside it.
	gc := collectorPolicyFrom(os.LookupEnv)
	restoreGC := func() {}
	if gc.offDuringStart() {
		gcPercent := debug.SetGCPercent(-1)
		restoreGC = func() { debug.SetGCPercent(gcPercent) }
	}
	cfg, err := app.FromEnv(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	a, err := app.Build(ctx, cfg, app.Options{PrefetchJWKS: true})
	if err != nil {
		return err
	}
	defer func() { _ = a.Close(context.WithoutCancel(ctx)) }()
	h, err := a.Handler(ctx)
	if err != nil {
		return err
	}
	if lambdahttp.UnderLambda() {
		handle := lambdahttp.Handler(h, a.LambdaOptions())
		// With a memory limit (the template sets GOMEMLIMIT under the
		// function's memory) far above what the start leaves, the
		// collector stays off and the limit alone triggers it: an instance
		// serves one request at a time, so collections are rare instead of
		// every few megabytes. Otherwise it comes back after the first
		// answer.
		if !gc.staysOff() {
			handle = afterFirstAnswer(handle, restoreGC)
		}
		lambda.StartWithOptions(handle, lambda.WithContext(ctx))
		return nil
	}
	restoreGC()
	a.Logger.Info("serving MCP over plain HTTP", "addr", cfg.ListenAddr, "resource", cfg.ResourceURL)
	return lambdahttp.Serve(h, a.LambdaOptions(), cfg.ListenAddr)
}

// runContext is the context of the whole run. Outside Lambda it ends on
// SIGINT or SIGTERM, so a start can be interrupted. Under Lambda nothing
// listens: the runtime sends SIGTERM only to functions with extensions,
// there is nothing to flush (metrics, audit records and trace segments
// are written during each invocation), and setting up signal delivery
// cost every cold start about 0.3 ms.
func runContext(underLambda bool) (context.Context, context.CancelFunc) {
	if underLambda {
		return context.WithCancel(context.Background())
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// afterFirstAnswer runs then once, when the second invocation arrives: the
// first answer has been sent by then. (A deferred call would run before the
// runtime posts the answer, and restoring the collector there started a
// cycle inside the first answer.)
func afterFirstAnswer(handle lambdahttp.LambdaHandler, then func()) lambdahttp.LambdaHandler {
	var answered atomic.Bool
	var once sync.Once
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if answered.Load() {
			once.Do(then)
		}
		defer answered.Store(true)
		return handle(ctx, ev)
	}
}

// collectorPolicy decides what the cold start does with the collector.
type collectorPolicy struct {
	// operatorGOGC: GOGC is set in the environment, and that choice stands.
	operatorGOGC bool
	// memoryLimit is the runtime's soft limit; math.MaxInt64 when none.
	memoryLimit int64
}

// minLimitCollectorOff is the least memory limit under which the collector
// stays off after the start: four times the most the start may leave
// (internal/app's TestTheStartLeavesFarLessHeapThanTheCollectorPolicyAssumes
// holds it under 16 MiB; about 2.7 MiB allocated there, its issuer included), so the limit does not
// trigger collections back to back. A test rather than a reading at each
// cold start: reading the heap cost it 0.1-0.3 ms.
const minLimitCollectorOff = 64 << 20

func collectorPolicyFrom(lookup func(string) (string, bool)) collectorPolicy {
	gogc, set := lookup("GOGC")
	return collectorPolicy{operatorGOGC: set && gogc != "", memoryLimit: debug.SetMemoryLimit(-1)}
}

// offDuringStart: the collector is switched off while the cold start builds
// its long-lived state, unless the operator chose GOGC.
func (p collectorPolicy) offDuringStart() bool { return !p.operatorGOGC }

// staysOff: the collector stays off after the first answer, under a memory
// limit of at least minLimitCollectorOff and unless the operator chose GOGC.
func (p collectorPolicy) staysOff() bool {
	return !p.operatorGOGC && p.memoryLimit != math.MaxInt64 && p.memoryLimit >= minLimitCollectorOff
}
