package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// Tool names the agents call.
const (
	toolRisk       = riskreview.ToolRequest
	toolTicket     = release.ToolCreate
	toolRiskStatus = "get_risk_review_status"
	toolGetOp      = "get_operation"
	toolApprove    = "approve_rollout"
	toolResolve    = "resolve_operation"
)

// attemptKind is how an agent's next attempt relates to its first call.
type attemptKind int

const (
	attemptFirst attemptKind = iota
	attemptSameID
	attemptChangedArgs
	attemptNewID
)

type attempt struct {
	kind    attemptKind
	replica int
	cancel  time.Duration // >0: the agent gives up after this long
}

// plan is one operation an agent means to perform, fully drawn from the
// seed before the campaign starts.
type plan struct {
	idx        int
	persona    stack.Persona
	tool       string
	args       map[string]any // without operation_id
	changed    map[string]any // the same operation_id with other arguments
	opID       string
	attempts   []attempt
	status     bool
	approve    bool
	cross      bool // the other tenant tries to read it
	provFault  string
	spike      bool
	crash      string // FaultCrashAfterIns / FaultCrashBeforeSW on the first attempt
	churn      int    // replica to stop for the plan's duration (-1: none)
	burst      int    // replica a burst hits (-1: none)
	otherIDSrc string // TenantSharedIDs: reuse this operation_id of another tenant or tenant-mate
	withdraw   bool   // the owner cancels the task once it is RETRYABLE, then asks again
}

// faultTwice suffixes a Release create mode aimed at a plan's target for
// its next two creates: the first and the re-send.
const faultTwice = "twice"

var (
	riskCreateModes = []riskapi.CreateMode{riskapi.CreateDropResponseAfterCommit, riskapi.CreateTimeoutBeforeCommit,
		riskapi.CreateError500BeforeCommit, riskapi.CreateError500AfterCommit, riskapi.CreateReject}
	riskLookupModes    = []riskapi.LookupMode{riskapi.LookupTimeout, riskapi.LookupError500}
	releaseCreateModes = []releaseapi.CreateMode{releaseapi.CreateDropResponseAfterCommit, releaseapi.CreateTimeoutBeforeCommit, releaseapi.CreateError500BeforeCommit, releaseapi.CreateDuplicateThenDrop, releaseapi.CreateError500AfterCommit, releaseapi.CreateReject}
	// releaseLateModes commit a create after its caller gave up: at the
	// commit deadline (the promise kept) or past it (the promise broken,
	// which the duplicate audit must turn into an incident), or just after
	// the re-send for its target (broken at the worst moment: only the
	// duplicate audit can see it).
	releaseLateModes   = []releaseapi.CreateMode{releaseapi.CreateCommitLateWithinDeadline, releaseapi.CreateCommitLateBeyondDeadline, releaseapi.CreateCommitOnResend}
	releaseSearchModes = []releaseapi.SearchMode{releaseapi.SearchHide, releaseapi.SearchTimeout, releaseapi.SearchPartial}
	// committedUnheard are the create modes that commit while the caller
	// hears nothing of it; pairedSearchModes are what the next search may
	// then do: time out (a failed lookup is no absence) or return a strict
	// subset (one match from a lookup that may hide others is not exactly
	// one).
	committedUnheard = map[releaseapi.CreateMode]bool{releaseapi.CreateDropResponseAfterCommit: true, releaseapi.CreateDuplicateThenDrop: true}
	// withdrawable are the create modes that leave an operation proven
	// absent past its horizon (RETRYABLE), which its owner may withdraw;
	// the broken promise then commits after the withdrawal, which only
	// the withdrawal's audit sees.
	withdrawable = map[string]bool{"release:" + string(releaseapi.CreateTimeoutBeforeCommit): true,
		"release:" + string(releaseapi.CreateError500BeforeCommit): true, "release:" + string(releaseapi.CreateCommitLateBeyondDeadline): true}
	pairedSearchModes  = []releaseapi.SearchMode{releaseapi.SearchTimeout, releaseapi.SearchPartial}
	ticketServices     = []string{"payments-api", "orders-api"}
	ticketEnvironments = []string{"production-eu", "staging"}
	riskReasons        = []string{"chargeback pattern", "velocity", "address mismatch", "manual check"}
	personaByName      = func() map[string]stack.Persona {
		m := map[string]stack.Persona{}
		for _, p := range stack.Personas() {
			m[p.Name] = p
		}
		return m
	}()
)

// makePlans draws a cell's operations from the seed.
func makePlans(cfg *Config, cell, n int) []plan {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cell)))
	plans := make([]plan, n)
	ticketModes := releaseCreateModes
	if cfg.LateCommits {
		ticketModes = append(slices.Clone(ticketModes), releaseLateModes...)
	}
	pick := func(p float64) bool { return rng.Float64() < p }
	for i := range plans {
		p := plan{idx: i, churn: -1, burst: -1, opID: fmt.Sprintf("chaos-%d-%d-%d", cfg.Seed, cell, i)}
		if pick(cfg.TicketShare) {
			p.persona, p.tool = personaByName["DEPLOYER"], toolTicket
			svc := ticketServices[rng.IntN(len(ticketServices))]
			env := ticketEnvironments[rng.IntN(len(ticketEnvironments))]
			commit := fmt.Sprintf("%040x", 0xabc0000+rng.IntN(cfg.CommitPool))
			p.args = map[string]any{"service": svc, "commit": commit, "environment": env}
			p.changed = map[string]any{"service": svc, "commit": commit, "environment": otherOf(ticketEnvironments, env)}
			p.approve = pick(cfg.Approve)
			if pick(cfg.ProviderFault) {
				if rng.IntN(4) == 0 {
					p.provFault = "release:search:" + string(releaseSearchModes[rng.IntN(len(releaseSearchModes))])
				} else {
					mode := ticketModes[rng.IntN(len(ticketModes))]
					p.provFault = "release:" + string(mode)
					// ownCommit gives the plan a commit no other plan draws,
					// so every create for its target is its own (a held fact
					// would deduplicate it) and so is every search.
					ownCommit := func() {
						commit = fmt.Sprintf("%040x", 0xdef0000+cell*100000+i)
						p.args["commit"], p.changed["commit"] = commit, commit
					}
					switch {
					case mode == releaseapi.CreateCommitLateBeyondDeadline && rng.IntN(2) == 0:
						// Both creates of one operation break the promise:
						// the first after the probe proved it absent, the
						// re-send after its own deadline, where only a
						// duplicate audit looking past the horizon sees it.
						p.provFault += ":" + faultTwice
						ownCommit()
					case committedUnheard[mode] && rng.IntN(2) == 0:
						// Two faults on one operation: its create committed
						// (once or twice) unheard, and the probe's first
						// search then fails or hides a ticket.
						p.provFault += ":search:" + string(pairedSearchModes[rng.IntN(len(pairedSearchModes))])
						ownCommit()
					}
				}
			}
		} else {
			// ALICE and CAROL are tenant-mates (M1, one client): they draw
			// the same orders, and their operation_ids, shared below, are
			// two users' keys.
			name, first := "ALICE", 1
			switch rng.IntN(3) {
			case 1:
				name, first = "BOB", 51
			case 2:
				name = "CAROL"
			}
			p.persona, p.tool = personaByName[name], toolRisk
			order := fmt.Sprintf("O20260728%03d", first+rng.IntN(50))
			reason := riskReasons[rng.IntN(len(riskReasons))]
			p.args = map[string]any{"order_id": order, "reason": reason}
			p.changed = map[string]any{"order_id": order, "reason": otherOf(riskReasons, reason)}
			p.cross = pick(cfg.CrossTenant)
			if pick(cfg.ProviderFault) {
				if rng.IntN(4) == 0 {
					p.provFault = "risk:lookup:" + string(riskLookupModes[rng.IntN(len(riskLookupModes))])
				} else {
					p.provFault = "risk:" + string(riskCreateModes[rng.IntN(len(riskCreateModes))])
				}
			}
			if cfg.TenantSharedIDs && i > 0 && rng.IntN(4) == 0 {
				// The tenant-mate's operation_id, as a shared assistant would reuse it.
				p.otherIDSrc = fmt.Sprintf("chaos-%d-%d-%d", cfg.Seed, cell, rng.IntN(i))
			}
		}
		// Without drawing, so every seed's other draws stay as they were.
		p.withdraw = withdrawable[p.provFault] && float64(hash(fmt.Sprintf("withdraw/%d/%d/%d", cfg.Seed, cell, i))%1000) < cfg.Withdraw*1000
		p.status = pick(cfg.StatusReads)
		p.spike = pick(cfg.LatencySpike)
		switch x := rng.Float64(); {
		case x < cfg.CrashInsert:
			p.crash = FaultCrashAfterIns
		case x < cfg.CrashInsert+cfg.CrashBeforeSW:
			p.crash = FaultCrashBeforeSW
		}
		if cfg.Replicas > 1 && pick(cfg.ReplicaChurn) {
			p.churn = rng.IntN(cfg.Replicas)
		}
		if pick(cfg.Burst) {
			p.burst = rng.IntN(cfg.Replicas)
		}
		cancelAfter := func() time.Duration {
			if pick(cfg.CallerCancel) {
				return time.Duration(20+rng.IntN(1500)) * time.Millisecond
			}
			return 0
		}
		p.attempts = []attempt{{kind: attemptFirst, replica: rng.IntN(cfg.Replicas), cancel: cancelAfter()}}
		for _, k := range []struct {
			kind attemptKind
			prob float64
		}{{attemptSameID, cfg.RetrySameID}, {attemptChangedArgs, cfg.ChangeArgs}, {attemptNewID, cfg.RetryNewID}} {
			if pick(k.prob) {
				p.attempts = append(p.attempts, attempt{kind: k.kind, replica: rng.IntN(cfg.Replicas), cancel: cancelAfter()})
			}
		}
		plans[i] = p
	}
	// At least one burst per cell while bursts are on, so a short campaign
	// still tests the admission gate (invariant 7). Chosen without drawing,
	// so every seed's other draws stay as they were.
	if cfg.Burst > 0 && n > 0 && !slices.ContainsFunc(plans, func(p plan) bool { return p.burst >= 0 }) {
		p := &plans[n/2]
		p.burst = (p.attempts[0].replica + 1) % cfg.Replicas
		if p.burst == p.churn { // a replica stopped for the plan answers nothing
			p.burst = (p.burst + 1) % cfg.Replicas
		}
	}
	return plans
}

func otherOf(list []string, v string) string {
	for _, s := range list {
		if s != v {
			return s
		}
	}
	return v
}

// agents call the cell's replicas over MCP with the official go-sdk
// client; one session per persona and replica, reconnected after a
// transport failure.
type agents struct {
	c      *cell
	tokens map[string]string
	// withdrawals run beside the workers: an owner waits for its
	// operation to be proven absent without holding a worker.
	withdrawals sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (a *agents) session(ctx context.Context, persona string, replica int) (*mcp.ClientSession, error) {
	key := fmt.Sprintf("%s/%d", persona, replica)
	a.mu.Lock()
	cs := a.sessions[key]
	a.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "chaos-agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: a.c.replicas[replica].url, HTTPClient: &http.Client{Transport: bearer{a.tokens[persona]}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", key, err)
	}
	a.mu.Lock()
	if old := a.sessions[key]; old != nil {
		a.mu.Unlock()
		_ = cs.Close()
		return old, nil
	}
	a.sessions[key] = cs
	a.mu.Unlock()
	return cs, nil
}

func (a *agents) drop(persona string, replica int) {
	key := fmt.Sprintf("%s/%d", persona, replica)
	a.mu.Lock()
	cs := a.sessions[key]
	delete(a.sessions, key)
	a.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

func (a *agents) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, cs := range a.sessions {
		_ = cs.Close()
		delete(a.sessions, k)
	}
}

// call makes one tool call and records it. arm, if set, runs with the
// call's cancel function before the call is sent (crash plans use it).
func (a *agents) call(ctx context.Context, planIdx int, persona string, replica int, tool string, args map[string]any,
	cancelAfter time.Duration, argsChanged bool, arm func(context.CancelFunc)) Call {
	c := Call{Cell: a.c.idx, Plan: planIdx, Persona: persona, Replica: replica, Tool: tool, Args: args, ArgsChanged: argsChanged}
	if id, ok := args["operation_id"].(string); ok {
		c.OperationID = id
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if cancelAfter > 0 {
		var stop context.CancelFunc
		cctx, stop = context.WithTimeout(cctx, cancelAfter)
		defer stop()
	}
	if arm != nil {
		arm(cancel)
	}
	c.Start = time.Now()
	res, err := a.do(cctx, persona, replica, tool, args)
	c.End = time.Now()
	if err != nil {
		c.TransportError = err.Error()
		c.Cancelled = cctx.Err() != nil
		if c.Cancelled && cancelAfter > 0 {
			a.c.rec.Fault(a.c.idx, FaultClientCancel, fmt.Sprintf("%s after %s", tool, cancelAfter), "")
		}
		a.drop(persona, replica)
	} else {
		fillAnswer(&c, res)
	}
	c.Seq = a.c.rec.Call(c)
	return c
}

func (a *agents) do(ctx context.Context, persona string, replica int, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	r := a.c.replicas[replica]
	if _, up := r.process(); !up {
		return nil, fmt.Errorf("replica %d is down: connection refused", replica)
	}
	cs, err := a.session(ctx, persona, replica)
	if err != nil {
		return nil, err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", tool, err)
	}
	return res, nil
}

func fillAnswer(c *Call, res *mcp.CallToolResult) {
	c.IsError = res.IsError
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		c.TransportError = "undecodable structured content: " + err.Error()
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		c.TransportError = "no structured content"
		return
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	c.Code, c.Status, c.Outcome = str("code"), str("status"), str("outcome")
	if c.IsError {
		c.Message = str("message")
	}
	if c.Status == "" {
		c.Status = str("state")
	}
	for _, k := range []string{"review_id", "ticket_handle", "handle"} {
		if h := str(k); h != "" {
			c.Handle = h
			break
		}
	}
	for _, k := range []string{"resource_id", "downstream_review_id", "ticket_id"} {
		if id := str(k); id != "" {
			c.ResourceID = id
			break
		}
	}
	c.Deduplicated, _ = body["deduplicated"].(bool)
	c.RetryAllowed, _ = body["retry_allowed"].(bool)
}

// handleOf is the handle the server derives for a caller's operation_id.
func handleOf(clientID, tenantID, subject, tool, opID string) string {
	k, err := operation.NewRequestKey(clientID, tenantID, subject, tool, opID)
	if err != nil {
		return ""
	}
	return k.Handle()
}

func withID(args map[string]any, id string) map[string]any {
	out := make(map[string]any, len(args)+1)
	for k, v := range args {
		out[k] = v
	}
	out["operation_id"] = id
	return out
}
