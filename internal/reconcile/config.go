package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/pause"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// Defaults of Config.
const (
	DefaultBatchLimit       = 25
	DefaultMaxPerInvocation = 100
	DefaultReserve          = 2 * time.Second
	DefaultOperator         = "intentgate-oncall" // as template.yaml's OperatorName
	DefaultMaxStreamWait    = 10 * time.Second
)

// Backoff bounds: probes and retries back off exponentially from
// backoffBase, capped at backoffCap, before jitter.
const (
	backoffBase = time.Second
	backoffCap  = time.Minute
)

// Config configures a Service. The clock is the Executor's.
type Config struct {
	Executor *tools.Executor
	// Families by tool name (operation.RequestKey.Tool).
	Families map[string]tools.WriteTool
	// BatchLimit is the number of due operations read per page.
	BatchLimit int
	// MaxPerInvocation bounds the operations one Sweep examines.
	MaxPerInvocation int
	// MaxParkPerInvocation bounds the items one Sweep sets aside: the
	// operations it parks (of a tool it has no family for), whether or not
	// the park applied, and the due items it cannot decode; default ten
	// times MaxPerInvocation. Parking is one small write each and happens
	// once per operation, so a large backlog of them clears in a few sweeps.
	MaxParkPerInvocation int
	// Reserve: stop taking new work when the context has less than this
	// left, so what was started is recorded before the Lambda ends.
	Reserve time.Duration
	// Operator is who escalations name (an on-call rotation).
	Operator string
	// Jitter spreads a backoff so replicas do not probe in lockstep;
	// default ±20% random. Tests inject an identity.
	Jitter func(time.Duration) time.Duration
	// Auditor, if set, receives one KindReconcile record per decision.
	Auditor *obs.Auditor
	// MaxStreamWait: a stream record for an operation due within this long
	// is held until it is due (a prompt first probe once the settle window
	// has passed) instead of being left to the next sweep. Default 10s.
	MaxStreamWait time.Duration
	// Sleep waits d or until ctx is done; tests inject one that advances
	// their clock. Default: a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Service reconciles operations. Safe for concurrent use; holds no state
// between calls beyond its configuration.
type Service struct {
	cfg Config
	st  *store.Store
}

// New validates cfg and fills defaults.
func New(cfg Config) (*Service, error) {
	if cfg.Executor == nil {
		return nil, errors.New("reconcile: executor is required")
	}
	if len(cfg.Families) == 0 {
		return nil, errors.New("reconcile: at least one tool family is required")
	}
	for name, f := range cfg.Families {
		if f == nil {
			return nil, fmt.Errorf("reconcile: family %q is nil", name)
		}
		if f.Name() != name {
			return nil, fmt.Errorf("reconcile: family registered as %q names itself %q", name, f.Name())
		}
		if r := f.Recovery(); r.ProbeBudget < 1 || r.RetryBudget < 0 || r.SettleWindow < 0 || r.MaxAge < 0 {
			return nil, fmt.Errorf("reconcile: family %q: recovery needs ProbeBudget >= 1 and non-negative RetryBudget, SettleWindow, MaxAge", name)
		}
		if n := JournalNeeds(f.Recovery()); n > operation.MaxJournal {
			return nil, fmt.Errorf("reconcile: family %q: its budgets can write %d journal events, more than the bound of %d; the escalation would not fit", name, n, operation.MaxJournal)
		}
	}
	if cfg.MaxStreamWait == 0 {
		cfg.MaxStreamWait = DefaultMaxStreamWait
	}
	if cfg.MaxStreamWait < 0 {
		return nil, fmt.Errorf("reconcile: MaxStreamWait must not be negative, got %s", cfg.MaxStreamWait)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = pause.Sleep
	}
	if cfg.BatchLimit == 0 {
		cfg.BatchLimit = DefaultBatchLimit
	}
	if cfg.BatchLimit < 1 || cfg.BatchLimit > store.MaxDueLimit {
		return nil, fmt.Errorf("reconcile: BatchLimit must be 1 to %d, got %d", store.MaxDueLimit, cfg.BatchLimit)
	}
	if cfg.MaxPerInvocation == 0 {
		cfg.MaxPerInvocation = DefaultMaxPerInvocation
	}
	if cfg.MaxPerInvocation < 1 {
		return nil, fmt.Errorf("reconcile: MaxPerInvocation must be positive, got %d", cfg.MaxPerInvocation)
	}
	if cfg.MaxParkPerInvocation == 0 {
		cfg.MaxParkPerInvocation = 10 * cfg.MaxPerInvocation
	}
	if cfg.MaxParkPerInvocation < 1 {
		return nil, fmt.Errorf("reconcile: MaxParkPerInvocation must be positive, got %d", cfg.MaxParkPerInvocation)
	}
	if cfg.Reserve == 0 {
		// Never less than what the budget keeps back for a store write:
		// work started with less would have its reads cut short.
		b := cfg.Executor.Budget()
		cfg.Reserve = max(DefaultReserve, b.Reserve+b.Store)
	}
	if cfg.Reserve < 0 {
		return nil, fmt.Errorf("reconcile: Reserve must not be negative, got %s", cfg.Reserve)
	}
	if cfg.Operator == "" {
		cfg.Operator = DefaultOperator
	}
	if cfg.Jitter == nil {
		cfg.Jitter = randomJitter
	}
	return &Service{cfg: cfg, st: cfg.Executor.Store()}, nil
}

// randomJitter spreads d uniformly over ±20%.
func randomJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	spread := d / 5
	return d - spread + time.Duration(rand.Int64N(int64(2*spread)+1))
}

// backoff is the un-jittered wait after n previous attempts: 1s, 2s, 4s,
// ... capped at one minute.
func backoff(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 6 { // 2^6 s > 1 min: avoid shifting into overflow
		return backoffCap
	}
	return min(backoffBase<<n, backoffCap)
}

// wait is backoff(n) with the configured jitter, never negative.
func (s *Service) wait(n int) time.Duration {
	return max(s.cfg.Jitter(backoff(n)), 0)
}

// JournalNeeds is the most journal events one operation can collect under
// these budgets: intent and dispatch, then per attempt one outcome and its
// probes, the claims between attempts, the escalation and the operator's
// resolution. It must stay within operation.MaxJournal, or an operation
// could be left unable to record its escalation.
func JournalNeeds(r tools.Recovery) int {
	attempts := r.RetryBudget + 1
	// Plus the duplicate audit (at most ProbeBudget searches) and one
	// stale dispatcher's evidence per attempt. A withdrawal instead of the
	// escalation is audited in as many searches, and may add per attempt
	// one effect its audit reports; each report, the audit's or a stale
	// dispatcher's, may be closed by an operator on its own.
	return 2 + attempts*(1+r.ProbeBudget) + r.RetryBudget + 1 + 1 + r.ProbeBudget + attempts + attempts + 2*attempts
}
