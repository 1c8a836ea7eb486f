package chaos

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
)

// ResourceURL is the audience every token of a campaign is minted for.
const ResourceURL = "https://intentgate.chaos/mcp"

// Fault kinds besides the store's (storefaults.go) and the simulators'
// modes, which are counted under "risk:<mode>" and "release:<mode>".
const (
	FaultReplicaStopped   = "replica_stopped"
	FaultReplicaRestarted = "replica_restarted"
	FaultClientCancel     = "crash_caller_cancelled"
	FaultLatencySpike     = "provider_latency_spike"
	FaultBurst            = "burst"
	FaultWithdrawn        = "task_withdrawn"
	FaultNotWithdrawn     = "task_cancel_refused"
	FaultTicketRemoved    = "operator_cancelled_ticket"
	FaultCloseRefused     = "operator_close_refused"
)

// Config of a campaign. Default() documents every default; docs/chaos.md
// lists them too.
type Config struct {
	Seed     uint64
	Ops      int // planned operations (agent intents), spread over the cells
	Cells    int // independent systems, each on its own small table
	Replicas int // MCP replicas per cell
	Workers  int // concurrent agents per cell
	// Engines are DynamoDB-compatible endpoints; cell i uses Engines[i % len].
	Engines []string

	// The mix.
	TicketShare  float64 // share of operations that are deployment tickets (rest: risk reviews)
	RetrySameID  float64 // per operation: the agent retries with the same operation_id
	RetryNewID   float64 // the agent retries the same intent with a new operation_id
	ChangeArgs   float64 // the agent reuses the operation_id with other arguments
	StatusReads  float64 // the agent reads the status after its call
	Approve      float64 // ticket operations: the agent calls approve_rollout
	CrossTenant  float64 // the other tenant of the shared client tries to read the handle
	CommitPool   int     // distinct commits per service and environment (business key collisions)
	ReplicaChurn float64 // per operation: stop a replica for its duration, then restart it
	Burst        float64 // per operation: a burst of writes of its intent at one replica (admission gate)
	BurstSize    int
	// BurstHold bounds how long a burst's inserts are held at its replica
	// (run.go, burst): below the store budget, so a held insert is still
	// sent within its call's time.
	BurstHold     time.Duration
	CallerCancel  float64 // per call: the agent gives up after a random short wait
	CrashInsert   float64 // per operation: the dispatcher dies right after its insert
	CrashBeforeSW float64 // per operation: the dispatcher dies after sending, before its state write
	// Withdraw: per ticket operation whose create fault leaves it proven
	// absent (timeout or 500 before commit, or the promise broken), the
	// chance that its owner cancels the task (tasks/cancel) once it is
	// RETRYABLE and then asks for the fact again with a new operation_id.
	Withdraw float64

	// Provider faults: per operation, the chance that one simulator fault
	// is armed before its first call (mode drawn uniformly from the
	// provider's modes), and the chance of a latency spike.
	ProviderFault float64
	LatencySpike  float64
	SpikeLatency  time.Duration
	StoreFaults   StoreFaultRates

	// Skew: every process of a cell (replicas, reconcilers) runs its own
	// clock, off the providers' by up to ±Skew; two processes differ by at
	// most 2×Skew, which must stay within SkewBound, the system's
	// INTENTGATE_CLOCK_SKEW_BOUND (0: no skew).
	Skew            time.Duration
	SkewBound       time.Duration
	TenantSharedIDs bool // the callers of one client (two tenants, two users of one) reuse each other's operation_ids
	LateCommits     bool // the Release API's late-commit modes join its create faults
	// LateCommitOverrun is how far past its commit deadline the broken
	// promise (commit_late_beyond_deadline) commits.
	LateCommitOverrun time.Duration
	// Stream drives the reconciler's stream entry point too: a local event
	// source mapping (internal/streampoll) per cell hands the table's
	// stream to reconcile.Service.HandleStream, beside the sweep.
	Stream         bool
	StreamIdleWait time.Duration // the poller's pause after an empty read
	// OverlappingSweeps runs every sweep twice at once, in two reconciler
	// processes with their own clocks and faulty stores: EventBridge
	// delivers a scheduled event at least once, and a sweep that runs long
	// overlaps the next. Their claims and probes race at one version.
	OverlappingSweeps bool

	// System settings of every replica.
	MaxInFlight        int
	MaxQueue           int
	MaxQueueWait       time.Duration
	DownstreamMaxConns int
	BudgetAuth         time.Duration
	BudgetStore        time.Duration
	BudgetDownstream   time.Duration
	BudgetReserve      time.Duration
	RiskSettleWindow   time.Duration
	ReleaseSearchLag   time.Duration
	SweepEvery         time.Duration // reconciler sweep period during the campaign
	// DueShards is INTENTGATE_DUE_SHARDS: the production default, since the
	// local engine's indexed Query reads only the shard's own items.
	DueShards      int
	QuietStep      time.Duration // clock advance per quiet-phase sweep
	MaxQuietSweeps int           // bound of the fixed-point loop
	OverloadSlack  time.Duration // an OVERLOADED answer must come within MaxQueueWait + this

	KeepTables bool
	Log        io.Writer // replicas' audit records and logs (default: discarded)
	Progress   io.Writer // progress lines (default: discarded)
}

// Default is the documented configuration; seed 0 means "draw one".
func Default() Config {
	return Config{
		Ops: 10000, Cells: 8, Replicas: 3, Workers: 4,
		TicketShare: 0.5, RetrySameID: 0.35, RetryNewID: 0.1, ChangeArgs: 0.05,
		StatusReads: 0.3, Approve: 0.2, CrossTenant: 0.1, CommitPool: 40,
		ReplicaChurn: 0.01, Burst: 0.01, BurstSize: 24, BurstHold: 1500 * time.Millisecond, CallerCancel: 0.03,
		CrashInsert: 0.02, CrashBeforeSW: 0.02, Withdraw: 0.5,
		ProviderFault: 0.15, LatencySpike: 0.02, SpikeLatency: 1200 * time.Millisecond,
		StoreFaults: StoreFaultRates{LostAnswer: 0.01, Throttle: 0.01, Error5xx: 0.01, Timeout: 0.003},
		MaxInFlight: 4, MaxQueue: 4, MaxQueueWait: 200 * time.Millisecond, DownstreamMaxConns: 2,
		BudgetAuth: 500 * time.Millisecond, BudgetStore: 3 * time.Second, BudgetDownstream: 800 * time.Millisecond,
		BudgetReserve: time.Second, RiskSettleWindow: 500 * time.Millisecond, ReleaseSearchLag: 200 * time.Millisecond,
		SweepEvery: 5 * time.Second, DueShards: 16, QuietStep: time.Minute, MaxQuietSweeps: 80,
		OverloadSlack: 2 * time.Second,
		Skew:          5 * time.Second, SkewBound: 10 * time.Second, TenantSharedIDs: true,
		LateCommits: true, LateCommitOverrun: releaseapi.DefaultLateCommitOverrun, Stream: true, StreamIdleWait: time.Second,
		OverlappingSweeps: true,
	}
}

// Validate refuses a configuration that cannot run or mean anything.
func (c *Config) Validate() error {
	var errs []error
	if c.Ops < 1 || c.Cells < 1 || c.Replicas < 1 || c.Workers < 1 {
		errs = append(errs, errors.New("ops, cells, replicas and workers must be positive"))
	}
	if len(c.Engines) == 0 {
		errs = append(errs, errors.New("at least one engine endpoint is required"))
	}
	for name, p := range map[string]float64{
		"ticket-share": c.TicketShare, "retry-same-id": c.RetrySameID, "retry-new-id": c.RetryNewID,
		"change-args": c.ChangeArgs, "status-reads": c.StatusReads, "approve": c.Approve,
		"cross-tenant": c.CrossTenant, "replica-churn": c.ReplicaChurn, "burst": c.Burst,
		"caller-cancel": c.CallerCancel, "crash-insert": c.CrashInsert, "crash-before-state-write": c.CrashBeforeSW,
		"withdraw":       c.Withdraw,
		"provider-fault": c.ProviderFault, "latency-spike": c.LatencySpike,
		"store-lost-answer": c.StoreFaults.LostAnswer, "store-throttle": c.StoreFaults.Throttle,
		"store-5xx": c.StoreFaults.Error5xx, "store-timeout": c.StoreFaults.Timeout,
	} {
		if p < 0 || p > 1 {
			errs = append(errs, fmt.Errorf("%s must be a probability in [0,1], got %v", name, p))
		}
	}
	if c.CommitPool < 1 || c.BurstSize < 1 || c.MaxQuietSweeps < 1 || c.DueShards < 1 {
		errs = append(errs, errors.New("commit-pool, burst-size, max-quiet-sweeps and due-shards must be positive"))
	}
	if c.Skew < 0 || 2*c.Skew > c.SkewBound {
		errs = append(errs, fmt.Errorf("skew must be 0 to half the skew bound (%s: two clocks then differ by at most the bound), got %s", c.SkewBound, c.Skew))
	}
	if c.BurstHold <= 0 || c.BurstHold >= c.BudgetStore {
		errs = append(errs, fmt.Errorf("burst-hold must be positive and below the store budget (%s), got %s", c.BudgetStore, c.BurstHold))
	}
	if c.LateCommitOverrun <= 0 {
		errs = append(errs, errors.New("late-commit-overrun must be positive"))
	}
	// A promise broken by more than the duplicate audit's grace is one the
	// design says it cannot see (docs/design.md, "The duplicate audit"):
	// the checker would report it as the server's.
	budget := admission.BudgetConfig{Auth: c.BudgetAuth, Store: c.BudgetStore, Downstream: c.BudgetDownstream, Reserve: c.BudgetReserve}
	if grace := tools.AuditGraceFor(tools.LeaseFor(budget, tools.DefaultLeaseMargin), c.SkewBound); c.LateCommitOverrun >= grace {
		errs = append(errs, fmt.Errorf("late-commit-overrun must be below the duplicate audit's grace (the lease and the skew bound: %s), got %s", grace, c.LateCommitOverrun))
	}
	if c.Stream && c.StreamIdleWait <= 0 {
		errs = append(errs, errors.New("stream-idle-wait must be positive"))
	}
	return errors.Join(errs...)
}

// skews are the clock skews of a cell's processes (replicas, then the
// sweeping reconciler, then the stream's), drawn from the seed within ±Skew.
func (c *Config) skews(cell int) []time.Duration {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(cell)+0x5e3))
	out := make([]time.Duration, c.Replicas+3)
	if c.Skew == 0 {
		return out
	}
	for i := range out {
		out[i] = time.Duration(rng.Int64N(int64(2*c.Skew)+1)) - c.Skew
	}
	return out
}
