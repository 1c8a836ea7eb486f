// Package chaos is a seeded fault campaign against the whole system: real
// MCP replicas, reconciler, store and simulators on a DynamoDB-compatible
// engine, driven by agents and an operator while faults are injected at
// the providers, in the store's transport, in the callers and in the
// processes. After the system is quiet it checks seven invariants over the
// recorded history (docs/chaos.md).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/streampoll"
)

// Result is what a campaign found.
type Result struct {
	Seed        uint64
	Ops         int
	Duration    time.Duration
	QuietSweeps []int
	Stream      StreamCounts
	Sweeps      SweepCounts
	// Provider counts what the simulators report beyond effects (late
	// commits queued, creates refused past their deadline), summed.
	Provider map[string]int
	// Engine is every request the campaign sent its engines, by sender
	// and action, with its wall time.
	Engine     map[string]EngineLoad
	Evidence   Evidence
	Violations []Violation
}

// SweepCounts is what the sweeps did in a campaign: how many ran, how many
// of them overlapped another (Config.OverlappingSweeps), and their claims.
type SweepCounts struct {
	Sweeps, Overlapped, ClaimsWon, ClaimsLost int64
}

// Run runs a campaign. An error means the campaign could not run; broken
// invariants are in Result.Violations.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("chaos: %w", err)
	}
	start := time.Now()
	rec := NewRecorder()
	meter := newEngineMeter()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("chaos: listen: %w", err)
	}
	iss, err := issuer.New("http://" + ln.Addr().String())
	if err != nil {
		return Result{}, fmt.Errorf("chaos: %w", err)
	}
	issSrv := &http.Server{Handler: iss.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = issSrv.Serve(ln) }()
	defer issSrv.Close()
	tokens := map[string]string{}
	for _, p := range stack.Personas() {
		tok, err := iss.Mint(issuer.Claims{Subject: p.Subject, ClientID: p.ClientID, MerchantID: p.Merchant, Roles: p.Roles,
			Audience: ResourceURL, TTL: 24 * time.Hour})
		if err != nil {
			return Result{}, fmt.Errorf("chaos: mint: %w", err)
		}
		tokens[p.Name] = tok
	}

	var trigger streampoll.Trigger
	if cfg.Stream {
		if trigger, err = streamTrigger(); err != nil {
			return Result{}, err
		}
	}
	cells := make([]*cell, cfg.Cells)
	defer func() {
		for _, c := range cells {
			if c != nil {
				c.stop(context.Background())
			}
		}
	}()
	quietTurns := map[string]*sync.Mutex{}
	for _, e := range cfg.Engines {
		if quietTurns[e] == nil {
			quietTurns[e] = &sync.Mutex{}
		}
	}
	for i := range cells {
		engine := cfg.Engines[i%len(cfg.Engines)]
		if cells[i], err = startCell(ctx, i, &cfg, rec, meter, quietTurns[engine], engine, iss.URL(), iss.JWKSURL(), trigger); err != nil {
			return Result{}, err
		}
	}
	fmt.Fprintf(cfg.Progress, "chaos: seed %d: %d operations on %d cells x %d replicas, started in %s\n",
		cfg.Seed, cfg.Ops, cfg.Cells, cfg.Replicas, time.Since(start).Round(time.Millisecond))

	res := Result{Seed: cfg.Seed, Ops: cfg.Ops, QuietSweeps: make([]int, cfg.Cells), Provider: map[string]int{}}
	var records [][]OpRecord = make([][]OpRecord, cfg.Cells)
	evidence := make([]cellEvidence, cfg.Cells)
	errs := make([]error, cfg.Cells)
	var wg sync.WaitGroup
	for i, c := range cells {
		n := cfg.Ops / cfg.Cells
		if i < cfg.Ops%cfg.Cells {
			n++
		}
		wg.Go(func() {
			records[i], evidence[i], res.QuietSweeps[i], errs[i] = c.campaign(ctx, n, tokens)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}

	ev := Evidence{Seed: cfg.Seed, History: rec.History(), EffectsByKey: map[string][]string{}, ExcusedByKey: map[string]int{}, RiskByHandle: map[string][]string{},
		TicketOrigins: map[string]string{}, MaxInFlight: map[string]int{}, InFlightCap: map[string]int{}, MaxQueueWait: cfg.MaxQueueWait, OverloadSlack: cfg.OverloadSlack,
		GateMaxInFlight: cfg.MaxInFlight, GateMaxQueue: cfg.MaxQueue, ClockSkewBound: cfg.SkewBound}
	for i := range cells {
		ev.Ops = append(ev.Ops, records[i]...)
		for k, v := range evidence[i].byKey {
			ev.EffectsByKey[k] = v
		}
		for k, v := range evidence[i].excused {
			ev.ExcusedByKey[k] = v
		}
		for k, v := range evidence[i].riskByHandle {
			ev.RiskByHandle[k] = v
		}
		maps.Copy(ev.TicketOrigins, evidence[i].ticketOrigins)
		for k, v := range evidence[i].maxInFlight {
			ev.MaxInFlight[k] = v
			ev.InFlightCap[k] = evidence[i].inFlightCap
		}
	}
	res.Evidence = ev
	for _, c := range cells {
		st := c.release.Stats()
		res.Provider["release: late commits queued"] += st.LateCommitsScheduled
		res.Provider["release: creates refused past their commit deadline"] += st.CreatesPastDeadline
		res.Provider["release: tickets committed"] += st.TicketsCommitted
		res.Stream.Batches += c.streamStats.batches.Load()
		res.Stream.Records += c.streamStats.records.Load()
		res.Stream.FailedRecords += c.streamStats.failedRecords.Load()
		res.Stream.FailedBatches += c.streamStats.failedBatches.Load()
		res.Sweeps.Sweeps += c.sweeps.sweeps.Load()
		res.Sweeps.Overlapped += c.sweeps.overlapped.Load()
		res.Sweeps.ClaimsWon += c.sweeps.claimsWon.Load()
		res.Sweeps.ClaimsLost += c.sweeps.claimsLost.Load()
		if why, _ := c.streamErr.Load().(string); why != "" {
			res.Stream.Stopped = append(res.Stream.Stopped, fmt.Sprintf("cell %d: %s", c.idx, why))
		}
	}
	res.Violations = Check(ev)
	res.Engine = meter.snapshot()
	res.Duration = time.Since(start)
	return res, nil
}

type cellEvidence struct {
	byKey        map[string][]string
	excused      map[string]int
	riskByHandle map[string][]string
	// ticketOrigins: how each ticket on a target with more than one came
	// to be (cell-qualified ticket id).
	ticketOrigins map[string]string
	maxInFlight   map[string]int
	inFlightCap   int
}

// campaign runs a cell's plans with its workers while the reconciler
// sweeps, then quiets the cell, lets the operator resolve, and gathers the
// evidence.
func (c *cell) campaign(ctx context.Context, n int, tokens map[string]string) ([]OpRecord, cellEvidence, int, error) {
	plans := makePlans(c.cfg, c.idx, n)
	ag := &agents{c: c, tokens: tokens, sessions: map[string]*mcp.ClientSession{}}
	defer ag.closeAll()
	handles := &handleSet{m: map[string]plan{}}

	sweepCtx, stopSweeps := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); c.sweeper(sweepCtx) }()
	// The stream entry point runs through the campaign and the quiet
	// phase, racing the sweeps as a second reconciler instance would.
	streamCtx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan struct{})
	if c.cfg.Stream {
		go func() { defer close(streamDone); c.streamer(streamCtx) }()
	} else {
		close(streamDone)
	}
	defer func() { stopStream(); <-streamDone }()

	work := make(chan plan)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for p := range work {
				ag.runPlan(ctx, p, handles)
			}
		})
	}
	for i, p := range plans {
		if ctx.Err() != nil {
			break
		}
		work <- p
		if (i+1)%50 == 0 {
			fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: %d/%d operations queued at %s\n", c.idx, i+1, n, time.Now().Format("15:04:05"))
		}
	}
	close(work)
	wg.Wait()
	ag.withdrawals.Wait()
	stopSweeps()
	<-sweepDone
	// Calls whose callers went away still run to their budget.
	time.Sleep(c.cfg.BudgetAuth + c.cfg.BudgetStore + c.cfg.BudgetDownstream + c.cfg.BudgetReserve)

	fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: %d operations done at %s; quieting\n", c.idx, n, time.Now().Format("15:04:05"))
	all := make([]string, 0, len(handles.m))
	for h := range handles.m {
		all = append(all, h)
	}
	sweeps, reads, err := c.quiesce(ctx, all)
	stopStream()
	<-streamDone
	if err == nil && reads == nil {
		// No fixed point: the checker judges the table as it is now.
		reads, err = c.readAll(ctx, all)
	}
	if err != nil {
		return nil, cellEvidence{}, sweeps, err
	}
	// What the faults aimed at a target left unused is dropped: the
	// operator's and the checker's searches see the provider as it is.
	if err := c.release.SetFaults(releaseapi.Faults{LateCommitOverrunMS: int(c.cfg.LateCommitOverrun / time.Millisecond), DropSearchForTarget: true}); err != nil {
		return nil, cellEvidence{}, sweeps, fmt.Errorf("chaos: drop aimed release faults: %w", err)
	}
	fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: quiet after %d sweeps at %s; operator\n", c.idx, sweeps, time.Now().Format("15:04:05"))
	if err := ag.operator(ctx, reads, func(op operation.Operation) ([]string, error) { return c.effectsOf(ctx, op) }); err != nil {
		return nil, cellEvidence{}, sweeps, err
	}
	records, ce, err := c.gather(ctx, handles, reads)
	return records, ce, sweeps, err
}

// gather takes every known operation's final state (the reads of the
// quiet phase, updated by the operator) and reads the providers' records.
func (c *cell) gather(ctx context.Context, handles *handleSet, reads opReads) ([]OpRecord, cellEvidence, error) {
	ce := cellEvidence{byKey: map[string][]string{}, excused: map[string]int{}, riskByHandle: map[string][]string{}, ticketOrigins: map[string]string{}, maxInFlight: map[string]int{}}
	var out []OpRecord
	for h, p := range handles.m {
		r := OpRecord{Cell: c.idx, Handle: h, Persona: p.persona.Name, Tenant: p.persona.Merchant, ClientID: p.persona.ClientID,
			Tool: p.tool, OperationID: p.opID, EffectKey: effectKey(p.tool, p.args)}
		if op, ok := reads[h]; ok {
			r.Final = &op
			r.EffectKey = effectKey(p.tool, anyMap(op.Target))
			holder, err := c.observer.BusinessKeyHolder(ctx, op.Key.Tool, op.BusinessKey)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, ce, fmt.Errorf("cell %d: business key of %s: %w", c.idx, op.Handle, err)
			}
			r.BusinessKeyHolder = holder
			if p.tool == toolRisk {
				ids, err := c.effectsOf(ctx, op)
				if err != nil {
					return nil, ce, err
				}
				ce.riskByHandle[cellKey(c.idx, h)] = ids
			}
		}
		out = append(out, r)
	}
	// Every effect the providers hold, by business fact.
	rs := c.risk.Stats()
	for order, n := range rs.ReviewsByOrder {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("review-%d", i) // counted; the ids that matter are read by request key
		}
		ce.byKey[cellKey(c.idx, "risk|"+order)] = ids
	}
	for _, r := range out {
		if r.Tool == toolRisk {
			if ids := ce.riskByHandle[cellKey(c.idx, r.Handle)]; len(ids) > 0 {
				key := cellKey(c.idx, r.EffectKey)
				ce.byKey[key] = mergeIDs(ce.byKey[key], ids)
			}
		}
	}
	ts := c.release.Stats()
	origins := c.release.Origins()
	for target, n := range ts.TicketsByTarget {
		parts := strings.SplitN(target, "/", 3)
		if len(parts) != 3 {
			continue
		}
		ids, err := c.effectsOf(ctx, operation.Operation{Key: operation.RequestKey{Tool: toolTicket},
			Target: map[string]string{"service": parts[0], "commit": parts[1], "environment": parts[2]}})
		if err != nil {
			return nil, ce, err
		}
		ce.byKey[cellKey(c.idx, "ticket|"+target)] = ids
		if n > 1 {
			for _, id := range ids {
				ce.ticketOrigins[cellKey(c.idx, id)] = origins[id].String()
			}
		}
	}
	for target, n := range ts.BrokenPromisesByTarget {
		ce.excused[cellKey(c.idx, "ticket|"+target)] = n
	}
	ce.maxInFlight[fmt.Sprintf("%d/risk", c.idx)] = rs.MaxInFlight
	ce.maxInFlight[fmt.Sprintf("%d/release", c.idx)] = ts.MaxInFlight
	ce.inFlightCap = c.downstreamProcesses() * c.cfg.DownstreamMaxConns
	return out, ce, nil
}

// downstreamProcesses counts the processes whose admission gates may each
// hold DownstreamMaxConns provider calls at once: the replicas, restarted
// ones whose calls may still run, the sweep's reconciler (which the
// operator's reads use too) and, with the stream entry point on, the
// stream's reconciler.
func (c *cell) downstreamProcesses() int {
	n := len(c.replicas) + 1
	for _, r := range c.replicas {
		n += r.restarts
	}
	if c.streamRecon != nil {
		n++
	}
	if c.overlap != nil {
		n++
	}
	return n
}

// mergeIDs replaces counted placeholders with real ids where known.
func mergeIDs(counted, real []string) []string {
	out := append([]string(nil), real...)
	for i := len(real); i < len(counted); i++ {
		out = append(out, counted[i])
	}
	return out
}

func effectKey(tool string, args map[string]any) string {
	s := func(k string) string { v, _ := args[k].(string); return v }
	if tool == toolRisk {
		return "risk|" + s("order_id")
	}
	return "ticket|" + s("service") + "/" + s("commit") + "/" + s("environment")
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
