// Command devstack is `make run`: the whole system on one machine. It starts
// the local DynamoDB-compatible engine (moto, one request at a time) unless
// INTENTGATE_DYNAMODB_ENDPOINT points elsewhere, creates the table, starts
// the token issuer and both downstream simulators, serves the MCP endpoint,
// and drives the reconciler both ways template.yaml wires it: the table's
// stream, read as Lambda's event source mapping reads it (internal/streampoll,
// with the template's batch size, window and FilterCriteria), and the sweep
// at the template's schedule rate (-sweep changes it). Ctrl-C stops
// everything it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/intentgate/intentgate/internal/localengine"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/streampoll"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the flags were printed
		}
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

// run starts everything, writes the env file, sweeps until ctx is done and
// then stops what it started. out receives the replicas' audit records and
// metrics; errOut the banner and progress.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	flags := flag.NewFlagSet("devstack", flag.ContinueOnError)
	flags.SetOutput(errOut)
	addr := flags.String("addr", envOr("DEVSTACK_MCP_ADDR", "127.0.0.1:8080"), "MCP listen address (default from DEVSTACK_MCP_ADDR if set; make run ARGS=\"-addr 127.0.0.1:9090\")")
	table := flags.String("table", envOr("INTENTGATE_TABLE", "intentgate-operations"), "operations table (default from INTENTGATE_TABLE if set)")
	sweepEvery := flags.Duration("sweep", 0, "reconciler sweep interval (default: the template's schedule rate)")
	templatePath := flags.String("template", "", "SAM template the stream trigger and sweep rate are read from (default <repo>/template.yaml)")
	streamOn := flags.Bool("stream", true, "poll the table's stream and hand batches to the reconciler's stream handler")
	searchLag := flags.Duration("search-lag", 2*time.Second, "Release API search index lag")
	tokenTTL := flags.Duration("token-ttl", 12*time.Hour, "lifetime of the printed tokens")
	envFile := flags.String("env-file", "", "where to write the shell exports (default <repo>/.devstack/env)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(errOut, nil))

	engine, err := localengine.Start(ctx)
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer func() { _ = engine.Stop() }()
	logger.Info("engine up", "kind", engine.Kind(), "endpoint", engine.Endpoint())

	s, err := stack.Start(ctx, stack.Config{
		EngineEndpoint: engine.Endpoint(), Table: *table, MCPAddrs: []string{*addr},
		RiskAddr: "127.0.0.1:0", ReleaseAddr: "127.0.0.1:0", IssuerAddr: "127.0.0.1:0",
		ReleaseSearchLag: *searchLag, Out: out,
		Env: map[string]string{"INTENTGATE_RISK_SETTLE_WINDOW": "1s"},
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w (another make run? stop it, or move this one: make run ARGS=\"-addr 127.0.0.1:9090\")", err)
	}
	if err != nil {
		return err
	}
	defer s.Stop()
	reconciler, err := s.Apps[0].Reconciler()
	if err != nil {
		return err
	}
	trigger, err := reconcilerTrigger(*templatePath)
	if err != nil {
		return err
	}
	if *sweepEvery <= 0 {
		*sweepEvery = trigger.SweepEvery
	}
	if *sweepEvery <= 0 {
		return errors.New("no sweep interval: the template has no schedule; pass -sweep")
	}
	pollErrs := make(chan error, 1)
	if *streamOn {
		poller, err := newStreamPoller(ctx, engine, *table, trigger, reconciler.HandleStream, logger)
		if err != nil {
			return err
		}
		pctx, stopPoller := context.WithCancel(ctx)
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			if err := poller.Run(pctx); err != nil {
				pollErrs <- fmt.Errorf("stream poller: %w", err)
			}
		}()
		defer func() { stopPoller(); <-polled }()
	}
	logger.Info("reconciler triggers", "stream", *streamOn, "batch_size", trigger.BatchSize,
		"batching_window", trigger.MaxBatchingWindow, "filters", len(trigger.FilterPatterns), "sweep_every", *sweepEvery)

	envText, err := s.EnvFile(engine.Endpoint(), *tokenTTL)
	if err != nil {
		return err
	}
	envPath := *envFile
	if envPath == "" {
		root, err := localengine.RepoRoot()
		if err != nil {
			return err
		}
		envPath = filepath.Join(root, ".devstack", "env")
	}
	if err := os.MkdirAll(filepath.Dir(envPath), 0o700); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	if err := os.WriteFile(envPath, []byte(envText), 0o600); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	fmt.Fprint(errOut, banner(s.MCPURLs[0], envPath))

	ticker := time.NewTicker(*sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopping")
			return nil
		case <-engine.Exited():
			return fmt.Errorf("the local engine %s died under the running stack; start make run again: %w",
				engine.Endpoint(), engine.ExitError())
		case err := <-s.Errors():
			return engineDied(engine, err)
		case err := <-pollErrs:
			return engineDied(engine, err)
		case <-ticker.C:
			// Each sweep gets what a reconciler invocation gets: time for its
			// reserve and a whole claimed dispatch, not just the tick.
			sctx, cancel := context.WithTimeout(ctx, sweepTimeout)
			rep, err := reconciler.Sweep(sctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				logger.Warn("sweep failed", "err", err)
			}
			if rep.Transitions > 0 {
				logger.Info("reconciled by the sweep", "examined", rep.Examined, "transitions", rep.Transitions, "claims_won", rep.ClaimsWon)
			}
		}
	}
}

// reconcilerTrigger reads the reconciler's stream and schedule events.
func reconcilerTrigger(path string) (streampoll.Trigger, error) {
	if path == "" {
		root, err := localengine.RepoRoot()
		if err != nil {
			return streampoll.Trigger{}, err
		}
		path = filepath.Join(root, "template.yaml")
	}
	tr, err := streampoll.TriggerFromTemplate(path, reconcilerFunction)
	if err != nil {
		return streampoll.Trigger{}, fmt.Errorf("reconciler trigger: %w", err)
	}
	return tr, nil
}

// reconcilerFunction is the template's logical id of the reconciler.
const reconcilerFunction = "ReconcilerFunction"

// newStreamPoller builds the local event source mapping for table's stream.
func newStreamPoller(ctx context.Context, engine *localengine.Engine, table string, tr streampoll.Trigger,
	handler streampoll.Handler, logger *slog.Logger) (*streampoll.Poller, error) {
	db, err := engine.Client(ctx)
	if err != nil {
		return nil, err
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("stream poller: describe table %s: %w", table, err)
	}
	streams, err := engine.StreamsClient(ctx)
	if err != nil {
		return nil, err
	}
	return streampoll.New(streams, streampoll.Config{
		StreamARN: aws.ToString(desc.Table.LatestStreamArn), Region: engine.Region(), Trigger: tr,
		Logger: logger.With("path", "stream"),
	}, handler)
}

// engineDied names the engine's death as the cause of err when the engine
// this stack started has ended (a poller or server failing because of it).
func engineDied(engine *localengine.Engine, err error) error {
	select {
	case <-engine.Exited():
		return fmt.Errorf("the local engine %s died under the running stack; start make run again: %w (then: %v)",
			engine.Endpoint(), engine.ExitError(), err)
	default:
		return err
	}
}

// sweepTimeout bounds one sweep like the reconciler Lambda's timeout does.
const sweepTimeout = 30 * time.Second

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func banner(mcpURL, envPath string) string {
	return fmt.Sprintf(`
intentgate devstack is up: MCP endpoint %[1]s

  source %[2]s      # MCP_URL, TOKEN_ALICE and TOKEN_CAROL (M1), TOKEN_BOB (M2), TOKEN_DEPLOYER, TOKEN_OPERATOR, RISK_API_URL, RELEASE_API_URL, DYNAMODB_ENDPOINT, ISSUER_URL

Call a tool with curl (protocol 2025-11-25, stateless JSON):
  curl -s "$MCP_URL" -H "Authorization: Bearer $TOKEN_ALICE" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review","arguments":{"order_id":"O20260728001","reason":"chargeback pattern","operation_id":"op-demo-0001"}}}'

Drop the next response after commit, then watch UNKNOWN turn into SUCCEEDED:
  curl -s -X POST "$RISK_API_URL/_sim/faults" -d '{"create":[{"mode":"drop_response_after_commit","times":1}]}'

With an MCP client (the go-sdk client; -protocol 2025-11-25 for an older one):
  go run ./infra/devstack/mcpcall -token "$TOKEN_ALICE" tools
  go run ./infra/devstack/mcpcall -token "$TOKEN_ALICE" call request_risk_review \
    '{"order_id":"O20260728003","reason":"velocity","operation_id":"op-demo-0003"}'

Ctrl-C stops everything this command started.
`, mcpURL, envPath)
}
