package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
)

// withdrawWait bounds how long an owner waits for its operation to be
// proven absent: the first probe of a timed-out ticket comes a lease, the
// skew bound and the settle window after its dispatch, and a sweep later.
const withdrawWait = 90 * time.Second

// withdraw is an owner giving up on a ticket. It polls the operation
// until it is proven absent (RETRYABLE, nothing it sent can still commit),
// cancels its task as an MCP Tasks client does (tasks/cancel at
// 2026-07-28), and once the cancel withdrew it asks for the fact again
// under a new operation_id: the request that makes a second ticket if the
// provider commits the withdrawn create late. A cancel the server refuses
// (a reconciler claimed the re-send first, or the absence is not final)
// is recorded and the plan ends there.
func (a *agents) withdraw(ctx context.Context, p plan, handle string, replica int, handles *handleSet) {
	c := a.c
	op, ok := a.awaitWithdrawable(ctx, handle)
	if !ok {
		return
	}
	ids, err := tasks.NewIDs([]byte(c.taskKey()))
	if err != nil {
		c.rec.Fault(c.idx, FaultNotWithdrawn, "task id key: "+err.Error(), handle)
		return
	}
	taskID := ids.For(op.Handle, op.CreatedAt)
	var decision map[string]any
	for try := range len(c.replicas) {
		// A replica stopped for another plan answers nothing: the owner
		// tries the next one, as with its calls.
		if decision, err = a.cancelTask(ctx, p.persona.Name, (replica+try)%len(c.replicas), taskID); err == nil {
			break
		}
	}
	a.snapshot(ctx, handle)
	if err != nil {
		c.rec.Fault(c.idx, FaultNotWithdrawn, "tasks/cancel: "+err.Error(), handle)
		return
	}
	if withdrawn, _ := decision["withdrawn"].(bool); !withdrawn {
		c.rec.Fault(c.idx, FaultNotWithdrawn, fmt.Sprintf("%v: %v", decision["state"], decision["reason"]), handle)
		return
	}
	c.rec.Fault(c.idx, FaultWithdrawn, "tasks/cancel withdrew it; the owner asks for the fact again", handle)
	id := p.opID + "-after-withdrawal"
	again := handleOf(p.persona.ClientID, p.persona.Merchant, p.persona.Subject, p.tool, id)
	handles.add(again, p)
	a.call(ctx, p.idx, p.persona.Name, replica, p.tool, withID(p.args, id), 0, false, nil)
	a.snapshot(ctx, again)
}

// awaitWithdrawable polls the table (fault-free, unrecorded) until the
// operation may be withdrawn; false once it settled otherwise or the wait
// ran out.
func (a *agents) awaitWithdrawable(ctx context.Context, handle string) (operation.Operation, bool) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(withdrawWait)
	for time.Now().Before(deadline) {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		op, err := a.c.observer.Get(gctx, handle)
		cancel()
		switch {
		case err != nil:
			// Not stored (an insert that never landed) or a slow read:
			// look again.
		case op.State == operation.StateRetryable && op.EffectRuledOut():
			return op, true
		case op.State.Settled() || op.State == operation.StateEscalated:
			return operation.Operation{}, false
		}
		select {
		case <-ctx.Done():
			return operation.Operation{}, false
		case <-tick.C:
		}
	}
	return operation.Operation{}, false
}

// cancelTask sends tasks/cancel for taskID to a replica as persona and
// returns the server's decision (_meta "io.github.intentgate/cancel":
// withdrawn, state, reason).
func (a *agents) cancelTask(ctx context.Context, persona string, replica int, taskID string) (map[string]any, error) {
	if _, up := a.c.replicas[replica].process(); !up {
		return nil, fmt.Errorf("replica %d is down: connection refused", replica)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": map[string]any{
		"taskId": taskID,
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "chaos-agent", "version": "1.0.0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		},
	}})
	if err != nil {
		return nil, fmt.Errorf("encode tasks/cancel: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, a.c.replicas[replica].url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("tasks/cancel request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+a.tokens[persona])
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tasks/cancel")
	req.Header.Set("Mcp-Name", taskID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tasks/cancel: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("tasks/cancel: read answer: %w", err)
	}
	var reply struct {
		Result struct {
			Meta map[string]map[string]any `json:"_meta"`
		} `json:"result"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return nil, fmt.Errorf("tasks/cancel: HTTP %d, undecodable answer %.200q: %w", resp.StatusCode, data, err)
	}
	if reply.Error != nil {
		return nil, fmt.Errorf("tasks/cancel: error %d: %s", reply.Error.Code, reply.Error.Message)
	}
	decision := reply.Result.Meta["io.github.intentgate/cancel"]
	if decision == nil {
		return nil, fmt.Errorf("tasks/cancel: HTTP %d, no decision in %.200q", resp.StatusCode, data)
	}
	return decision, nil
}
