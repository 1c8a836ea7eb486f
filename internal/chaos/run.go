package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/store"
)

// runPlan performs one planned operation the way an agent would.
func (a *agents) runPlan(ctx context.Context, p plan, handles *handleSet) {
	c := a.c
	if p.churn >= 0 {
		r := c.replicas[p.churn]
		if c.stopReplica(r) {
			defer func() {
				if err := c.restartReplica(ctx, r); err != nil {
					fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: %v\n", c.idx, err)
				}
			}()
		}
	}
	c.armProviderFault(p)

	for i, at := range p.attempts {
		id, args, changed := p.opID, p.args, false
		switch at.kind {
		case attemptChangedArgs:
			args, changed = p.changed, true
		case attemptNewID:
			id = p.opID + "-again"
		}
		if p.otherIDSrc != "" && at.kind != attemptNewID {
			id = p.otherIDSrc
		}
		handle := handleOf(p.persona.ClientID, p.persona.Merchant, p.persona.Subject, p.tool, id)
		handles.add(handle, p)
		replica := at.replica
		for try := 0; try < 3; try++ {
			var arm func(context.CancelFunc)
			if i == 0 && try == 0 && p.crash != "" {
				if proc, up := c.replicas[replica].process(); up {
					arm = func(cancel context.CancelFunc) { proc.faults.PlanCrash(handle, p.crash, cancel) }
					defer proc.faults.ForgetCrash(handle)
				}
			}
			call := a.call(ctx, p.idx, p.persona.Name, replica, p.tool, withID(args, id), at.cancel, changed, arm)
			a.snapshot(ctx, handle)
			if call.Answered() && call.Code != "OVERLOADED" && call.Code != "TEMPORARY_UNAVAILABLE" {
				break
			}
			replica = (replica + 1) % len(c.replicas) // the agent tries another replica, same operation_id
			at.cancel = 0
		}
		if i == 0 && p.withdraw {
			a.withdrawals.Go(func() { a.withdraw(ctx, p, handle, at.replica, handles) })
		}
	}

	handle := handleOf(p.persona.ClientID, p.persona.Merchant, p.persona.Subject, p.tool, p.opID)
	if p.otherIDSrc != "" {
		handle = handleOf(p.persona.ClientID, p.persona.Merchant, p.persona.Subject, p.tool, p.otherIDSrc)
	}
	replica := p.attempts[0].replica
	if p.status {
		if p.tool == toolRisk {
			a.call(ctx, p.idx, p.persona.Name, replica, toolRiskStatus, map[string]any{"review_id": handle}, 0, false, nil)
		} else {
			a.call(ctx, p.idx, p.persona.Name, replica, toolGetOp, map[string]any{"operation_id": p.opID}, 0, false, nil)
		}
	}
	if p.approve {
		a.call(ctx, p.idx, p.persona.Name, replica, toolApprove, map[string]any{"operation_id": p.opID}, 0, false, nil)
	}
	if p.cross {
		other := "BOB" // the other tenant of the shared client
		if p.persona.Name == "BOB" {
			other = "ALICE"
		}
		a.call(ctx, p.idx, other, replica, toolRiskStatus, map[string]any{"review_id": handle}, 0, false, nil)
		a.call(ctx, p.idx, other, replica, toolGetOp, map[string]any{"handle": handle}, 0, false, nil)
	}
	if p.burst >= 0 {
		a.burst(ctx, p, handles)
	}
}

// burst sends the same intent from many callers at once, each with its
// own operation_id, at one replica: the gate admits what fits, the
// business key deduplicates what it admits. The replica's store transport
// holds the burst's inserts until every call has returned or is held, so
// each admitted call keeps its gate slot meanwhile and the gate must
// refuse all but its slots (invariant 7 judges the recorded Burst).
func (a *agents) burst(ctx context.Context, p plan, handles *handleSet) {
	c := a.c
	c.rec.Fault(c.idx, FaultBurst, fmt.Sprintf("%d writes at replica %d", c.cfg.BurstSize, p.burst), "")
	b := Burst{Cell: c.idx, Plan: p.idx, Replica: p.burst, OperationID: p.opID, Size: c.cfg.BurstSize, Calls: make([]int, c.cfg.BurstSize)}
	ids := make([]string, c.cfg.BurstSize)
	held := make([]string, c.cfg.BurstSize)
	for k := range ids {
		ids[k] = fmt.Sprintf("%s-burst-%d", p.opID, k)
		held[k] = handleOf(p.persona.ClientID, p.persona.Merchant, p.persona.Subject, p.tool, ids[k])
		handles.add(held[k], p)
	}
	hold := newInsertHold(held)
	// A replica down now answers nothing: no hold, nothing to judge.
	proc, up := c.replicas[p.burst].process()
	if up {
		defer proc.faults.HoldInserts(hold)()
	}
	var wg sync.WaitGroup
	for k, id := range ids {
		wg.Go(func() {
			call := a.call(ctx, p.idx, p.persona.Name, p.burst, p.tool, withID(p.args, id), 0, false, nil)
			b.Calls[k] = call.Seq
			hold.callReturned()
		})
	}
	if up {
		b.Complete, b.Released = hold.liftWhenSettled(c.cfg.BurstHold)
	}
	wg.Wait()
	b.Holds = hold.snapshot()
	c.rec.Burst(b)
}

// snapshot reads the operation back from the table (fault-free) into the
// history, when it exists.
func (a *agents) snapshot(ctx context.Context, handle string) (operation.Operation, bool) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	op, err := a.c.observer.Get(sctx, handle)
	if err != nil {
		return operation.Operation{}, false
	}
	a.c.rec.Snapshot(op)
	return op, true
}

// armProviderFault installs the plan's simulator fault (and latency
// spike). A simulator's fault queue is global: under concurrency another
// operation's call may take it; the history records which call saw what.
func (c *cell) armProviderFault(p plan) {
	latency := 0
	if p.spike {
		latency = int(c.cfg.SpikeLatency / time.Millisecond)
		c.rec.Fault(c.idx, FaultLatencySpike, p.tool, "")
	}
	if p.provFault == "" && latency == 0 {
		return
	}
	parts := strings.Split(p.provFault, ":")
	overrun := int(c.cfg.LateCommitOverrun / time.Millisecond)
	target := fmt.Sprintf("%v/%v/%v", p.args["service"], p.args["commit"], p.args["environment"]) // a ticket plan's
	var err error
	switch {
	case p.tool == toolRisk && len(parts) == 3:
		err = c.risk.SetFaults(riskapi.Faults{Lookup: []riskapi.LookupFault{{Mode: riskapi.LookupMode(parts[2]), Times: 1}}, LatencyMS: latency})
	case p.tool == toolRisk && len(parts) == 2:
		err = c.risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateMode(parts[1]), Times: 1}}, LatencyMS: latency})
	case p.tool == toolRisk:
		err = c.risk.SetFaults(riskapi.Faults{LatencyMS: latency})
	case len(parts) == 3 && parts[2] == faultTwice: // release:<create>:twice, aimed at this plan's target's next two creates
		err = c.release.SetFaults(releaseapi.Faults{CreateForTarget: map[string]releaseapi.CreateMode{target: releaseapi.CreateMode(parts[1])},
			CreateForTargetTimes: map[string]int{target: 2}, LatencyMS: latency, LateCommitOverrunMS: overrun})
	case len(parts) == 4: // release:<create>:search:<search>, both aimed at this plan's target
		err = c.release.SetFaults(releaseapi.Faults{CreateForTarget: map[string]releaseapi.CreateMode{target: releaseapi.CreateMode(parts[1])},
			SearchForTarget: map[string]releaseapi.SearchMode{target: releaseapi.SearchMode(parts[3])}, LatencyMS: latency, LateCommitOverrunMS: overrun})
	case len(parts) == 3:
		err = c.release.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchMode(parts[2]), Times: 1}}, LatencyMS: latency, LateCommitOverrunMS: overrun})
	case len(parts) == 2:
		err = c.release.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateMode(parts[1]), Times: 1}}, LatencyMS: latency, LateCommitOverrunMS: overrun})
	default:
		err = c.release.SetFaults(releaseapi.Faults{LatencyMS: latency, LateCommitOverrunMS: overrun})
	}
	if err != nil {
		fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: arm %s: %v\n", c.idx, p.provFault, err)
		return
	}
	if p.provFault != "" {
		c.rec.Fault(c.idx, p.provFault, p.opID, "")
	}
}

// handleSet is every handle a cell's agents may have created, with the
// plan that named it.
type handleSet struct {
	mu sync.Mutex
	m  map[string]plan
}

func (h *handleSet) add(handle string, p plan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[handle]; !ok {
		h.m[handle] = p
	}
}

// sweeper runs the reconciler's sweep entry point until ctx ends.
func (c *cell) sweeper(ctx context.Context) {
	svc, err := c.reconciler()
	if err != nil {
		fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: %v\n", c.idx, err)
		return
	}
	t := time.NewTicker(c.cfg.SweepEvery)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = c.sweep(sctx, svc)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// quiesce stops every fault, restarts stopped replicas and runs the
// reconciler to a fixed point: sweeps, each after the cell's clocks moved
// QuietStep forward, until nothing known is PENDING, UNKNOWN or RETRYABLE
// or MaxQuietSweeps were run. It returns the number of sweeps and, at a
// fixed point, every operation as read then: nothing is due and nothing
// UNKNOWN or RETRYABLE is left for the stream, so those reads are final
// until the operator acts (nil without a fixed point).
func (c *cell) quiesce(ctx context.Context, handles []string) (int, opReads, error) {
	c.setFaults(false)
	if err := c.risk.SetFaults(riskapi.Faults{}); err != nil {
		return 0, nil, fmt.Errorf("chaos: clear risk faults: %w", err)
	}
	// Late commits already queued still come: the provider has them.
	// Faults aimed at a target stay: they wait for that operation's own
	// probe, which mostly comes in this phase (gather drops what is left).
	if err := c.release.SetFaults(releaseapi.Faults{LateCommitOverrunMS: int(c.cfg.LateCommitOverrun / time.Millisecond)}); err != nil {
		return 0, nil, fmt.Errorf("chaos: clear release faults: %w", err)
	}
	for _, r := range c.replicas {
		if err := c.restartReplica(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	svc, err := c.reconciler()
	if err != nil {
		return 0, nil, err
	}
	advance := true
	for i := 1; i <= c.cfg.MaxQuietSweeps; i++ {
		// Time moves only after a sweep that ran: a sweep the engine was
		// too slow for is retried at the same instant, so the clocks never
		// outrun a reconciler that could not look (they would carry
		// operations past their maximum age unprobed).
		if advance {
			c.offset.Add(int64(c.cfg.QuietStep))
		}
		// One quiet sweep per engine at a time: the engine answers one
		// request at a time, and index queries of several cells queued
		// behind each other all run out of their store budget together
		// (and a cancelled query still costs the engine its whole read).
		c.quietTurn.Lock()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		rep, err := c.sweep(sctx, svc)
		cancel()
		c.quietTurn.Unlock()
		advance = err == nil
		if err != nil {
			// A slow engine read ends a sweep; the next one takes over.
			fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: quiet sweep %d: %v\n", c.idx, i, err)
			continue
		}
		if rep.Examined > 0 || rep.Stopped != "drained" {
			continue
		}
		reads, err := c.readAll(ctx, handles)
		if err != nil {
			return i, nil, err
		}
		if reads.unsettled() == 0 {
			return i, reads, nil
		}
	}
	return c.cfg.MaxQuietSweeps, nil, nil
}

// opReads are operations read from the table by handle; a handle that is
// not stored has no entry.
type opReads map[string]operation.Operation

// readAll reads every handle from the table, fault-free.
func (c *cell) readAll(ctx context.Context, handles []string) (opReads, error) {
	reads := opReads{}
	for _, h := range handles {
		op, err := c.observer.Get(ctx, h)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: read %s: %w", h, err)
		}
		reads[h] = op
	}
	return reads, nil
}

// unsettled counts operations neither settled nor ESCALATED.
func (r opReads) unsettled() int {
	n := 0
	for _, op := range r {
		if !op.State.Settled() && op.State != operation.StateEscalated || op.WithdrawalAuditPending() {
			n++
		}
	}
	return n
}

// closeReported is the runbook's closing of effects reported after op
// FAILED (a withdrawn ticket the provider committed late): every reported
// ticket that is not the verified effect of the operation holding the fact
// now is cancelled at the provider, and resolve_operation states them
// removed, no request of op able to commit any more (the quiet phase is
// over). The server checks the provider itself and may refuse; the
// history records its answer.
func (a *agents) closeReported(ctx context.Context, h string, op operation.Operation, reads opReads) error {
	if op.Key.Tool != toolTicket {
		return nil // only the Release simulator cancels an effect
	}
	var holdersTicket string
	holder, err := a.c.observer.BusinessKeyHolder(ctx, op.Key.Tool, op.BusinessKey)
	switch {
	case err == nil && holder != "":
		if cur, err := a.c.observer.Get(ctx, holder); err == nil && cur.State == operation.StateSucceeded {
			holdersTicket = cur.ResourceID
		}
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("chaos: operator reads the holder of %s: %w", h, err)
	}
	var removed []string
	for _, id := range op.EffectsReportedAfterFailure() {
		if id != holdersTicket && a.c.release.RemoveTicket(id) {
			removed = append(removed, id)
		}
	}
	a.c.rec.Fault(a.c.idx, FaultTicketRemoved, fmt.Sprintf("operator cancelled %v at the provider (holder's ticket %q kept)", removed, holdersTicket), h)
	answer := a.call(ctx, -1, "OPERATOR", 0, toolResolve, map[string]any{"handle": h, "resolution": "FAILED", "effects_removed": true,
		"late_commits_ruled_out": true, "evidence": fmt.Sprintf("cancelled %v in the release queue; the quiet phase is over, "+
			"so no request of this operation can still commit", removed)}, 0, false, nil)
	if answer.IsError || !answer.Answered() {
		why := fmt.Sprintf("resolve_operation answered %s %s %s %s", answer.Code, answer.Status, answer.TransportError, answer.Message)
		a.c.rec.Fault(a.c.idx, FaultCloseRefused, why, h)
		fmt.Fprintf(a.c.cfg.Progress, "chaos: cell %d: closing %s refused: %s\n", a.c.idx, h, why)
	}
	after, ok := a.snapshot(ctx, h)
	if !ok {
		if after, err = a.c.observer.Get(ctx, h); err != nil {
			return fmt.Errorf("chaos: operator read %s: %w", h, err)
		}
	}
	reads[h] = after
	return nil
}

// operator resolves every ESCALATED operation it can prove from the
// provider's records, through resolve_operation with evidence; what it
// cannot prove (several effects: an incident) it leaves ESCALATED.
//
// reads are the operations as the quiet phase left them; the operator
// updates them with what it resolved, so they stay the final table.
func (a *agents) operator(ctx context.Context, reads opReads, effects func(operation.Operation) ([]string, error)) error {
	closings, incidents := reads.operatorWork()
	for _, h := range closings {
		if err := a.closeReported(ctx, h, reads[h], reads); err != nil {
			return err
		}
	}
	for _, h := range incidents {
		op := reads[h]
		found, err := effects(op)
		if err != nil {
			return err
		}
		args := map[string]any{"handle": h}
		switch len(found) {
		case 0:
			// The quiet phase is over: every late commit the simulators
			// queued has happened, and a held create they never commit
			// (timeout_before_commit) never will. That is what the
			// statement says, and what a Risk API absence needs.
			args["resolution"], args["evidence"] = "FAILED", "provider search after quiet period: no effect for this operation; "+
				"the simulators hold no request of it that can still commit"
			args["late_commits_ruled_out"] = true
			if op.ResourceID != "" {
				args["effects_removed"] = true
			}
		case 1:
			args["resolution"], args["evidence"], args["resource_id"] = "SUCCEEDED", "provider shows exactly one effect: "+found[0], found[0]
		default:
			continue // an incident: nothing is chosen
		}
		a.call(ctx, -1, "OPERATOR", 0, toolResolve, args, 0, false, nil)
		after, ok := a.snapshot(ctx, h)
		if !ok {
			var err error
			if after, err = a.c.observer.Get(ctx, h); err != nil {
				return fmt.Errorf("chaos: operator read %s: %w", h, err)
			}
		}
		reads[h] = after
	}
	return reads.followHolders(ctx, a.c.observer)
}

// operatorWork lists what the operator acts on, each operation once under
// its own handle (a key answered by deduplication reads as its holder: the
// holder is acted on, not the key), in a fixed order: first the effects
// reported after failure, whose closing cancels tickets at the provider,
// then the incidents, which that closing may have left with one effect.
func (r opReads) operatorWork() (closings, incidents []string) {
	var unread []operation.Operation
	for _, op := range r {
		if _, ok := r[op.Handle]; !ok {
			unread = append(unread, op) // a holder known only by a key bound to it
		}
	}
	for _, op := range unread {
		r[op.Handle] = op
	}
	for h, op := range r {
		switch {
		case h != op.Handle:
		case op.State == operation.StateFailed && len(op.EffectsReportedAfterFailure()) > 0:
			closings = append(closings, h)
		case op.State == operation.StateEscalated:
			incidents = append(incidents, h)
		}
	}
	slices.Sort(closings)
	slices.Sort(incidents)
	return closings, incidents
}

// followHolders makes every key answered by deduplication read as its
// holder does now: the operator's reads updated the holder's entry only.
func (r opReads) followHolders(ctx context.Context, observer *store.Store) error {
	for h, op := range r {
		if h == op.Handle {
			continue
		}
		holder, ok := r[op.Handle]
		if !ok {
			var err error
			if holder, err = observer.Get(ctx, h); err != nil {
				return fmt.Errorf("chaos: read %s: %w", h, err)
			}
		}
		r[h] = holder
	}
	return nil
}

// simGet reads a simulator endpoint with the service's key.
func simGet(ctx context.Context, base, key, path string, q url.Values, out any) (int, error) {
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("chaos: %w", err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("chaos: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("chaos: decode %s: %w", u, err)
	}
	return resp.StatusCode, nil
}

// effectsOf lists the provider effects an operation may own: risk reviews
// created with its request key; tickets for its target.
func (c *cell) effectsOf(ctx context.Context, op operation.Operation) ([]string, error) {
	if op.Key.Tool == toolRisk {
		var res struct {
			Reviews []riskapi.Review `json:"reviews"`
		}
		if _, err := simGet(ctx, c.riskURL, stack.RiskAPIKey, "/reviews", url.Values{"request_key": {op.Handle}}, &res); err != nil {
			return nil, err
		}
		ids := make([]string, 0, len(res.Reviews))
		for _, r := range res.Reviews {
			ids = append(ids, r.ReviewID)
		}
		return ids, nil
	}
	var res struct {
		Tickets  []releaseapi.Ticket `json:"tickets"`
		Complete bool                `json:"complete"`
	}
	q := url.Values{"service": {op.Target["service"]}, "commit": {op.Target["commit"]}, "environment": {op.Target["environment"]}}
	if _, err := simGet(ctx, c.releaseURL, stack.ReleaseAPIKey, "/tickets", q, &res); err != nil {
		return nil, err
	}
	if !res.Complete {
		return nil, fmt.Errorf("chaos: ticket search incomplete for %s", op.Handle)
	}
	ids := make([]string, 0, len(res.Tickets))
	for _, t := range res.Tickets {
		ids = append(ids, t.TicketID)
	}
	return ids, nil
}
