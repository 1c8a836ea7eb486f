// Command chaos runs a seeded fault campaign against the whole system on
// local engines (or INTENTGATE_DYNAMODB_ENDPOINT) and prints its summary
// table; it exits 1 when an invariant was violated. `make chaos SEED=…
// OPS=…` runs it; docs/chaos.md describes the flags and defaults.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/intentgate/intentgate/internal/chaos"
	"github.com/intentgate/intentgate/internal/localengine"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg := chaos.Default()
	var engines, show int
	var verbose bool
	flag.Uint64Var(&cfg.Seed, "seed", 0, "campaign seed (0: draw one and print it)")
	flag.IntVar(&cfg.Ops, "ops", cfg.Ops, "planned operations")
	flag.IntVar(&cfg.Cells, "cells", cfg.Cells, "independent systems, each on its own small table")
	flag.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "MCP replicas per cell")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent agents per cell")
	flag.IntVar(&engines, "engines", 2, "local engines to start (ignored with INTENTGATE_DYNAMODB_ENDPOINT)")
	flag.Float64Var(&cfg.TicketShare, "ticket-share", cfg.TicketShare, "share of deployment-ticket operations")
	flag.Float64Var(&cfg.RetrySameID, "retry-same-id", cfg.RetrySameID, "P(agent retries with the same operation_id)")
	flag.Float64Var(&cfg.RetryNewID, "retry-new-id", cfg.RetryNewID, "P(agent retries the intent with a new operation_id)")
	flag.Float64Var(&cfg.ChangeArgs, "change-args", cfg.ChangeArgs, "P(agent reuses the operation_id with other arguments)")
	flag.Float64Var(&cfg.StatusReads, "status-reads", cfg.StatusReads, "P(agent reads the status)")
	flag.Float64Var(&cfg.Approve, "approve", cfg.Approve, "P(agent calls approve_rollout on its ticket)")
	flag.Float64Var(&cfg.CrossTenant, "cross-tenant", cfg.CrossTenant, "P(the other tenant of the shared client reads the handle)")
	flag.IntVar(&cfg.CommitPool, "commit-pool", cfg.CommitPool, "distinct commits per service and environment")
	flag.Float64Var(&cfg.ReplicaChurn, "replica-churn", cfg.ReplicaChurn, "P(a replica is stopped for an operation, then restarted)")
	flag.Float64Var(&cfg.Burst, "burst", cfg.Burst, "P(per operation: a burst of writes of its intent hits one replica)")
	flag.IntVar(&cfg.BurstSize, "burst-size", cfg.BurstSize, "writes per burst")
	flag.DurationVar(&cfg.BurstHold, "burst-hold", cfg.BurstHold, "longest hold on a burst's inserts at its replica (below the store budget)")
	flag.Float64Var(&cfg.CallerCancel, "caller-cancel", cfg.CallerCancel, "P(per call: the agent gives up after a random short wait)")
	flag.Float64Var(&cfg.CrashInsert, "crash-after-insert", cfg.CrashInsert, "P(the dispatcher dies right after its insert)")
	flag.Float64Var(&cfg.CrashBeforeSW, "crash-before-state-write", cfg.CrashBeforeSW, "P(the dispatcher dies after sending, before its state write)")
	flag.Float64Var(&cfg.Withdraw, "withdraw", cfg.Withdraw, "P(a ticket proven absent after a create fault: its owner cancels the task, then asks for the fact again)")
	flag.Float64Var(&cfg.ProviderFault, "provider-fault", cfg.ProviderFault, "P(one simulator fault is armed for an operation)")
	flag.Float64Var(&cfg.LatencySpike, "latency-spike", cfg.LatencySpike, "P(a provider latency spike)")
	flag.DurationVar(&cfg.SpikeLatency, "spike-latency", cfg.SpikeLatency, "latency of a spike")
	flag.Float64Var(&cfg.StoreFaults.LostAnswer, "store-lost-answer", cfg.StoreFaults.LostAnswer, "P(per store write: applied, answer lost)")
	flag.Float64Var(&cfg.StoreFaults.Throttle, "store-throttle", cfg.StoreFaults.Throttle, "P(per store request: throttled)")
	flag.Float64Var(&cfg.StoreFaults.Error5xx, "store-5xx", cfg.StoreFaults.Error5xx, "P(per store request: 500)")
	flag.Float64Var(&cfg.StoreFaults.Timeout, "store-timeout", cfg.StoreFaults.Timeout, "P(per store write: applied, answer held past the deadline)")
	flag.DurationVar(&cfg.Skew, "skew", cfg.Skew, "per-process clock skew, ±; at most half of -skew-bound (0: off)")
	flag.DurationVar(&cfg.SkewBound, "skew-bound", cfg.SkewBound, "INTENTGATE_CLOCK_SKEW_BOUND of every process")
	flag.BoolVar(&cfg.TenantSharedIDs, "tenant-shared-ids", cfg.TenantSharedIDs, "tenants of one client reuse each other's operation_ids")
	flag.BoolVar(&cfg.LateCommits, "late-commits", cfg.LateCommits, "the Release API's late-commit modes (within and beyond the commit deadline) join its create faults")
	flag.DurationVar(&cfg.LateCommitOverrun, "late-commit-overrun", cfg.LateCommitOverrun, "how far past its commit deadline commit_late_beyond_deadline commits")
	flag.BoolVar(&cfg.Stream, "stream", cfg.Stream, "drive the reconciler's stream entry point too (a local event source mapping per cell)")
	flag.BoolVar(&cfg.OverlappingSweeps, "overlapping-sweeps", cfg.OverlappingSweeps, "run every sweep twice at once in two reconciler processes (a scheduled event delivered twice, a slow sweep overlapping the next)")
	flag.DurationVar(&cfg.StreamIdleWait, "stream-idle-wait", cfg.StreamIdleWait, "the stream poller's pause after an empty read")
	flag.IntVar(&cfg.DueShards, "due-shards", cfg.DueShards, "INTENTGATE_DUE_SHARDS of every replica and reconciler")
	flag.DurationVar(&cfg.SweepEvery, "sweep-every", cfg.SweepEvery, "reconciler sweep period during the campaign")
	flag.IntVar(&show, "show", 5, "violations printed with their history")
	flag.BoolVar(&verbose, "v", false, "progress lines")
	flag.Parse()

	if cfg.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	fmt.Printf("chaos: seed %d (replay: make chaos SEED=%d OPS=%d)\n", cfg.Seed, cfg.Seed, cfg.Ops)
	if verbose {
		cfg.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv(localengine.EnvEndpoint) != "" || os.Getenv(localengine.EnvKind) != "" {
		engines = 1
	}
	for range max(engines, 1) {
		e, err := localengine.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
		defer func() { _ = e.Stop() }()
		cfg.Engines = append(cfg.Engines, e.Endpoint())
	}
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	chaos.PrintSummary(os.Stdout, res)
	printCPU(res.Ops, res.Duration)
	chaos.PrintViolations(os.Stdout, res, show)
	if len(res.Violations) > 0 {
		fmt.Printf("chaos: %d invariant violations; replay: make chaos SEED=%d OPS=%d\n", len(res.Violations), res.Seed, res.Ops)
		return 1
	}
	return 0
}
