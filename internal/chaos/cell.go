package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/streampoll"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// cell is one complete system: its own small table, Risk and Release API
// simulators, several MCP replicas and a reconciler, all sharing the
// table. Cells are independent, so a campaign spreads over several small
// tables (the local engine's transactions cost grows with table size).
type cell struct {
	idx      int
	cfg      *Config
	rec      *Recorder
	table    string
	endpoint string

	risk       *riskapi.Server
	release    *releaseapi.Server
	riskURL    string
	releaseURL string
	simStops   []func()

	appCfg app.Config
	// offset moves every clock of the cell forward together (the quiet
	// phase passes settle windows and backoffs without sleeping); each
	// process adds its own skew.
	offset atomic.Int64

	replicas []*replica
	recon    *process
	// overlap is the second sweep's process (Config.OverlappingSweeps).
	overlap  *process
	sweeps   sweepStats
	observer *store.Store // fault-free reads for the history and the checker

	// The stream entry point (Config.Stream): its own reconciler process
	// and the event source mapping's settings.
	streamRecon *process
	trigger     streampoll.Trigger
	streamStats streamStats
	streamErr   atomic.Value // string: why the stream entry point stopped
	meter       *engineMeter // requests to the engine, shared by the cells
	quietTurn   *sync.Mutex  // shared by the cells of one engine: one quiet sweep at a time
}

// process is one replica or reconciler: an App over a store whose HTTP
// transport injects faults, with its own skewed clock.
type process struct {
	app    *app.App
	faults *StoreFaults
	skew   time.Duration
}

// replica is an MCP server process that can be stopped and restarted on
// its address.
type replica struct {
	idx  int
	addr string
	url  string

	mu       sync.Mutex
	proc     *process
	srv      *http.Server
	up       bool
	restarts int
}

func (c *cell) now(skew time.Duration) time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()) + skew)
}

// simClock is the simulators' clock: the cell's time without skew.
func (c *cell) simClock() time.Time { return c.now(0) }

func startCell(ctx context.Context, idx int, cfg *Config, rec *Recorder, meter *engineMeter, quietTurn *sync.Mutex,
	endpoint, issuerURL, jwksURL string, trigger streampoll.Trigger) (*cell, error) {
	c := &cell{idx: idx, cfg: cfg, rec: rec, meter: meter, quietTurn: quietTurn, endpoint: endpoint, trigger: trigger,
		table: fmt.Sprintf("chaos-%d-%d-%d", cfg.Seed&0xffffff, idx, time.Now().UnixNano()%1e6)}
	c.risk = riskapi.New(riskapi.Config{APIKey: stack.RiskAPIKey, Clock: c.simClock, HoldLimit: 5 * time.Second})
	c.release = releaseapi.New(releaseapi.Config{APIKey: stack.ReleaseAPIKey, Clock: c.simClock,
		SearchLag: cfg.ReleaseSearchLag, HoldLimit: 5 * time.Second})
	var err error
	if c.riskURL, err = c.serveSim(c.risk); err != nil {
		return nil, err
	}
	if c.releaseURL, err = c.serveSim(c.release); err != nil {
		return nil, err
	}
	env := map[string]string{
		"INTENTGATE_DYNAMODB_ENDPOINT":     endpoint,
		"INTENTGATE_TABLE":                 c.table,
		"INTENTGATE_RESOURCE_URL":          ResourceURL,
		"INTENTGATE_JWT_ISSUER":            issuerURL,
		"INTENTGATE_JWKS_URL":              jwksURL,
		"INTENTGATE_RISK_API_URL":          c.riskURL,
		"INTENTGATE_RISK_API_KEY":          stack.RiskAPIKey,
		"INTENTGATE_RELEASE_API_URL":       c.releaseURL,
		"INTENTGATE_RELEASE_API_KEY":       stack.ReleaseAPIKey,
		"INTENTGATE_DEPLOY_GRANTS":         stack.DeployGrants,
		"INTENTGATE_RELEASE_SETTLE_WINDOW": release.RecoveryForLag(cfg.ReleaseSearchLag).SettleWindow.String(),
		"INTENTGATE_RISK_SETTLE_WINDOW":    cfg.RiskSettleWindow.String(),
		"INTENTGATE_MAX_IN_FLIGHT":         fmt.Sprint(cfg.MaxInFlight),
		"INTENTGATE_MAX_QUEUE":             fmt.Sprint(cfg.MaxQueue),
		"INTENTGATE_MAX_QUEUE_WAIT":        cfg.MaxQueueWait.String(),
		"INTENTGATE_DOWNSTREAM_MAX_CONNS":  fmt.Sprint(cfg.DownstreamMaxConns),
		"INTENTGATE_BUDGET_AUTH":           cfg.BudgetAuth.String(),
		"INTENTGATE_BUDGET_STORE":          cfg.BudgetStore.String(),
		"INTENTGATE_BUDGET_DOWNSTREAM":     cfg.BudgetDownstream.String(),
		"INTENTGATE_BUDGET_RESERVE":        cfg.BudgetReserve.String(),
		"INTENTGATE_CLOCK_SKEW_BOUND":      cfg.SkewBound.String(),
		"INTENTGATE_DUE_SHARDS":            fmt.Sprint(cfg.DueShards),
		"INTENTGATE_TASK_ID_KEY":           c.taskKey(),
	}
	if c.appCfg, err = app.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		return nil, fmt.Errorf("chaos: cell %d: %w", idx, err)
	}
	db, err := c.dynamo(ctx, "campaign", nil)
	if err != nil {
		return nil, err
	}
	if c.observer, err = store.New(db, store.Config{Table: c.table, Retention: c.appCfg.Retention}); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if err := c.observer.EnsureTable(ctx); err != nil {
		return nil, fmt.Errorf("chaos: cell %d: %w", idx, err)
	}
	skews := cfg.skews(idx)
	for i := 0; i < cfg.Replicas; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("chaos: listen: %w", err)
		}
		r := &replica{idx: i, addr: ln.Addr().String()}
		r.url = "http://" + r.addr + "/mcp"
		c.replicas = append(c.replicas, r)
		if err := c.startReplica(ctx, r, ln, skews[i]); err != nil {
			return nil, err
		}
	}
	if c.recon, err = c.newProcess(ctx, "reconciler", skews[cfg.Replicas]); err != nil {
		return nil, err
	}
	if cfg.Stream {
		if c.streamRecon, err = c.newProcess(ctx, "stream-reconciler", skews[cfg.Replicas+1]); err != nil {
			return nil, err
		}
	}
	if cfg.OverlappingSweeps {
		if c.overlap, err = c.newProcess(ctx, "overlapping-reconciler", skews[cfg.Replicas+2]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// dynamo builds the SDK client of one process; faults, when given, sit in
// its HTTP transport.
func (c *cell) dynamo(ctx context.Context, role string, wrap func(dynamoHTTPClient) dynamoHTTPClient) (*dynamodb.Client, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(c.appCfg.Region),
		config.WithCredentialsProvider(aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("local", "local", ""))))
	if err != nil {
		return nil, fmt.Errorf("chaos: aws config: %w", err)
	}
	return dynamodb.NewFromConfig(awsCfg, store.ClientOptions(c.endpoint), func(o *dynamodb.Options) {
		o.Logger = logging.Nop{} // injected faults make the SDK warn on every withheld body
		next := o.HTTPClient
		if c.meter != nil {
			next = c.meter.wrap(role, next)
		}
		if wrap != nil {
			next = wrap(next)
		}
		o.HTTPClient = next
	}), nil
}

func (c *cell) newProcess(ctx context.Context, who string, skew time.Duration) (*process, error) {
	p := &process{skew: skew}
	seed := c.cfg.Seed ^ uint64(c.idx)<<32 ^ hash(who)
	db, err := c.dynamo(ctx, strings.TrimRight(who, "-.0123456789"), func(next dynamodb.HTTPClient) dynamodb.HTTPClient {
		p.faults = NewStoreFaults(next, seed, c.cfg.StoreFaults, c.rec, c.idx, who)
		return p.faults
	})
	if err != nil {
		return nil, err
	}
	p.app, err = app.Build(ctx, c.appCfg, app.Options{Out: c.cfg.Log, Clock: func() time.Time { return c.now(skew) }, DynamoDB: db})
	if err != nil {
		return nil, fmt.Errorf("chaos: cell %d %s: %w", c.idx, who, err)
	}
	return p, nil
}

// startReplica builds a fresh process (an empty gate, new connections) and
// serves it on ln.
func (c *cell) startReplica(ctx context.Context, r *replica, ln net.Listener, skew time.Duration) error {
	p, err := c.newProcess(ctx, fmt.Sprintf("replica-%d.%d", r.idx, r.restarts), skew)
	if err != nil {
		_ = ln.Close()
		return err
	}
	h, err := p.app.Handler(ctx)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("chaos: cell %d replica %d: %w", c.idx, r.idx, err)
	}
	srv := &http.Server{Handler: lambdahttp.LocalHandler(h, p.app.LambdaOptions()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.mu.Lock()
	r.proc, r.srv, r.up = p, srv, true
	r.mu.Unlock()
	return nil
}

// stopReplica kills a replica: its listener and connections close at
// once, so calls in flight lose their answers and their contexts end.
func (c *cell) stopReplica(r *replica) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.up {
		return false
	}
	_ = r.srv.Close()
	_ = r.proc.app.Close(context.Background())
	r.up = false
	c.rec.Fault(c.idx, FaultReplicaStopped, fmt.Sprintf("replica %d", r.idx), "")
	return true
}

// restartReplica brings a stopped replica back on its address.
func (c *cell) restartReplica(ctx context.Context, r *replica) error {
	r.mu.Lock()
	if r.up {
		r.mu.Unlock()
		return nil
	}
	r.restarts++
	skew := r.proc.skew
	r.mu.Unlock()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("chaos: relisten %s: %w", r.addr, err)
	}
	c.rec.Fault(c.idx, FaultReplicaRestarted, fmt.Sprintf("replica %d", r.idx), "")
	return c.startReplica(ctx, r, ln, skew)
}

func (r *replica) process() (*process, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc, r.up
}

func (c *cell) setFaults(on bool) {
	for _, r := range c.replicas {
		if p, _ := r.process(); p != nil {
			p.faults.SetEnabled(on)
		}
	}
	c.recon.faults.SetEnabled(on)
	if c.streamRecon != nil {
		c.streamRecon.faults.SetEnabled(on)
	}
	if c.overlap != nil {
		c.overlap.faults.SetEnabled(on)
	}
}

func (c *cell) reconciler() (*reconcile.Service, error) {
	svc, err := c.recon.app.Reconciler()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return svc, nil
}

func (c *cell) serveSim(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	c.simStops = append(c.simStops, func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

func (c *cell) stop(ctx context.Context) {
	for _, r := range c.replicas {
		c.stopReplicaQuietly(r)
	}
	for _, p := range []*process{c.recon, c.streamRecon, c.overlap} {
		if p != nil {
			_ = p.app.Close(ctx)
		}
	}
	if c.observer != nil && !c.cfg.KeepTables {
		// Bounded: an interrupted campaign on an overloaded engine must
		// still exit (the engine process goes with it anyway).
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.observer.DeleteTable(dctx); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(c.cfg.Log, "chaos: cell %d: delete table: %v\n", c.idx, err)
		}
	}
	for _, s := range c.simStops {
		s()
	}
}

func (c *cell) stopReplicaQuietly(r *replica) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up {
		_ = r.srv.Close()
		_ = r.proc.app.Close(context.Background())
		r.up = false
	}
}

// taskKey is the cell's task id key: every replica answers tasks under
// it, and the agents mint their own operations' task ids with it.
func (c *cell) taskKey() string {
	return fmt.Sprintf("chaos-task-id-key-%016x-cell-%d", c.cfg.Seed, c.idx)
}

func hash(s string) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// dynamoHTTPClient is the SDK's HTTP client interface.
type dynamoHTTPClient = dynamodb.HTTPClient

// sweepStats counts the sweeps' claims, for the summary: with overlapping
// sweeps, lost claims show that they raced.
type sweepStats struct {
	sweeps, overlapped, claimsWon, claimsLost atomic.Int64
}

func (s *sweepStats) add(rep reconcile.SweepReport, overlapped bool) {
	s.sweeps.Add(1)
	if overlapped {
		s.overlapped.Add(1)
	}
	s.claimsWon.Add(int64(rep.ClaimsWon))
	s.claimsLost.Add(int64(rep.ClaimsLost))
}

// sweep runs the reconciler's sweep and, with overlapping sweeps, the
// second process's at the same moment; it returns the first one's report
// and error. The second's outcome counts only in the summary: it is the
// fault, and the first decides the quiet phase's progress.
func (c *cell) sweep(ctx context.Context, svc *reconcile.Service) (reconcile.SweepReport, error) {
	if c.overlap == nil {
		rep, err := svc.Sweep(ctx)
		c.sweeps.add(rep, false)
		return rep, err
	}
	other, err := c.overlap.app.Reconciler()
	if err != nil {
		return reconcile.SweepReport{}, fmt.Errorf("chaos: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		rep, _ := other.Sweep(ctx)
		c.sweeps.add(rep, true)
	})
	rep, err := svc.Sweep(ctx)
	c.sweeps.add(rep, true)
	wg.Wait()
	return rep, err
}
