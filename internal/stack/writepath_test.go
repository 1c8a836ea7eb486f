package stack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

func reviewArgs(order, reason, opID string) map[string]any {
	args := map[string]any{"order_id": order, "reason": reason}
	if opID != "" {
		args["operation_id"] = opID
	}
	return args
}

func TestTwoReplicasSameOperationIDCreateOnce(t *testing.T) {
	h := startStack(t, 2, nil)
	tok := h.token(t, "ALICE")
	sessions := []*mcp.ClientSession{connect(t, h.MCPURLs[0], tok, protocolNew), connect(t, h.MCPURLs[1], tok, protocolOld)}
	results := make([]map[string]any, 2)
	testsync.Race(len(sessions), func(i int) {
		results[i], _ = call(t, sessions[i], riskreview.ToolRequest, reviewArgs("O20260728001", "chargeback pattern", "op-replicas-0001"))
	})
	require.NotEmpty(t, results[0]["review_id"])
	assert.Equal(t, results[0]["review_id"], results[1]["review_id"], "both callers get the same review")
	st := h.Risk.Stats()
	assert.Equal(t, 1, st.CreateCalls, "one downstream create")
	assert.False(t, st.ForeignAuthorizationSeen, "the callers' bearer tokens reached the server, never the provider")
	assert.Equal(t, 1, st.ReviewsCommitted)
	// Both callers converge on the same result once the winner has recorded it.
	final, isErr := call(t, sessions[1], riskreview.ToolStatus, map[string]any{"review_id": results[0]["review_id"]})
	assert.False(t, isErr)
	assert.Equal(t, "SUCCEEDED", final["status"])
	assert.Equal(t, "committed_and_verified", final["outcome"])
}

func TestNewOperationIDForSameOrderIsDeduplicated(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	first, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728002", "velocity", "op-dedupe-0001"))
	require.False(t, isErr, first)
	second, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728002", "velocity again", "op-dedupe-0002"))
	assert.False(t, isErr, second)
	assert.Equal(t, true, second["deduplicated"])
	assert.Equal(t, first["review_id"], second["review_id"])
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls, "no second create")
}

func TestDroppedResponseIsUnknownAndRetryDoesNotCreateAgain(t *testing.T) {
	h := startStack(t, 1, nil)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	args := reviewArgs("O20260728003", "account takeover", "op-dropped-0001")
	res, isErr := call(t, cs, riskreview.ToolRequest, args)
	assert.True(t, isErr, "not done: the call did not succeed (yet)")
	assert.Equal(t, "UNKNOWN", res["status"])
	assert.Equal(t, "dispatch_acknowledged_response_missing", res["outcome"])
	assert.Equal(t, false, res["retry_allowed"])
	assert.NotEmpty(t, res["review_id"])
	assert.Equal(t, riskreview.ToolStatus, res["next_action"].(map[string]any)["tool"])

	again, _ := call(t, cs, riskreview.ToolRequest, args)
	assert.Equal(t, res["review_id"], again["review_id"])
	assert.Equal(t, "UNKNOWN", again["status"])
	st := h.Risk.Stats()
	assert.Equal(t, 1, st.CreateCalls, "the retry did not call create again")
	assert.Equal(t, 1, st.ReviewsCommitted)
}

func TestForeignOrderIsForbiddenWithNoEffect(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "BOB"), protocolNew)
	res, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728001", "looks odd", "op-forbidden-1"))
	assert.True(t, isErr)
	assert.Equal(t, "FORBIDDEN", res["code"])
	assert.Equal(t, 0, h.Risk.Stats().CreateCalls)
	key, err := operation.NewRequestKey(persona("BOB").ClientID, persona("BOB").Merchant, persona("BOB").Subject, riskreview.ToolRequest, "op-forbidden-1")
	require.NoError(t, err)
	_, err = h.Apps[0].Store.GetByKey(context.Background(), key)
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing stored")
	assert.Contains(t, h.out.String(), `"policy_decision":"deny"`)
}

func TestSameOperationIDWithChangedReasonIsAConflict(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	_, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728004", "first reason", "op-conflict-01"))
	require.False(t, isErr)
	res, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728004", "changed reason", "op-conflict-01"))
	assert.True(t, isErr)
	assert.Equal(t, "IDEMPOTENCY_CONFLICT", res["code"])
	assert.Equal(t, false, res["retry_allowed"])
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls, "nothing dispatched for the conflict")
}

func TestIdempotencyKeyHeaderActsAsOperationID(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connectWith(t, h.MCPURLs[0], bearer{token: h.token(t, "ALICE"), idempotencyKey: "hdr-key-0001"}, protocolNew)
	first, _ := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728005", "r", ""))
	second, _ := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728005", "r", ""))
	assert.Equal(t, "hdr-key-0001", first["operation_id"])
	assert.Equal(t, first["review_id"], second["review_id"])
	assert.Equal(t, false, second["deduplicated"], "a replay of the same key, not a new intent")
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls)
}

func TestServerMintsAnOperationIDWhenNoneIsSent(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	res, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728006", "r", ""))
	require.False(t, isErr, res)
	assert.True(t, strings.HasPrefix(res["operation_id"].(string), "srv-"))
}

func TestBadTokensGet401BeforeMCP(t *testing.T) {
	h := startStack(t, 1, nil)
	alice := persona("ALICE")
	claims := issuer.Claims{Subject: alice.Subject, ClientID: alice.ClientID, MerchantID: alice.Merchant, Audience: h.ResourceURL, TTL: time.Hour}
	expired, err := h.Issuer.Mint(claims, issuer.Expired())
	require.NoError(t, err)
	wrongAud, err := h.Issuer.Mint(claims, issuer.WithAudience("https://other.example/mcp"))
	require.NoError(t, err)
	wrongIss, err := h.Issuer.Mint(claims, issuer.WithIssuer("https://evil.example"))
	require.NoError(t, err)
	cases := map[string]string{
		"missing":        "",
		"expired":        expired,
		"wrong audience": wrongAud,
		"wrong issuer":   wrongIss,
		"alg none":       h.Issuer.MintUnsigned(claims),
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review","arguments":{"order_id":"O20260728001","reason":"x"}}}`
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, h.MCPURLs[0], strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", protocolOld)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `resource_metadata="https://intentgate.test/.well-known/oauth-protected-resource/mcp"`)
		})
	}
	assert.Equal(t, 0, h.Risk.Stats().CreateCalls)
	assert.NotContains(t, h.out.String(), expired, "tokens never reach the logs")
}

func TestProtectedResourceMetadataIsServed(t *testing.T) {
	h := startStack(t, 1, nil)
	base := strings.TrimSuffix(h.MCPURLs[0], "/mcp")
	resp, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(data), `"resource":"https://intentgate.test/mcp"`)
	assert.Contains(t, string(data), h.IssuerURL)
}

func TestInvalidArgumentsNeverReachStoreOrDownstream(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	cases := map[string]map[string]any{
		"extra property":       {"order_id": "O20260728007", "reason": "r", "approved": true},
		"501-character reason": {"order_id": "O20260728007", "reason": strings.Repeat("x", 501)},
		"malformed order id":   {"order_id": "ORDER-7", "reason": "r"},
		"bad operation id":     {"order_id": "O20260728007", "reason": "r", "operation_id": "no spaces allowed"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			res, isErr := call(t, cs, riskreview.ToolRequest, args)
			assert.True(t, isErr)
			assert.Equal(t, "INVALID_ARGUMENT", res["code"], res)
		})
	}
	st := h.Risk.Stats()
	assert.Equal(t, 0, st.CreateCalls)
	assert.Equal(t, 0, st.MaxInFlight, "not even the orders lookup was made")
	assert.NotContains(t, h.out.String(), `"kind":"transition"`, "nothing stored")
}

func TestSlowDownstreamYieldsUnknownBeforeTheDeadline(t *testing.T) {
	h := startStack(t, 1, nil)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	// The client's own deadline is far beyond the server's downstream budget
	// (800ms): the answer must be UNKNOWN with a handle, not a client timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, isErr := callCtx(t, ctx, cs, riskreview.ToolRequest, reviewArgs("O20260728008", "slow", "op-slow-00001"))
	assert.True(t, isErr)
	assert.Equal(t, "UNKNOWN", res["status"])
	assert.NotEmpty(t, res["review_id"])
	assert.Equal(t, false, res["retry_allowed"])
	assert.Contains(t, h.out.String(), `"event":"client_timeout"`)
}

func TestOldAndNewProtocolClientsBothWork(t *testing.T) {
	h := startStack(t, 1, nil)
	for i, protocol := range []string{protocolOld, protocolNew, "2025-06-18"} {
		t.Run(protocol, func(t *testing.T) {
			cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocol)
			assert.Equal(t, protocol, cs.InitializeResult().ProtocolVersion)
			list, err := cs.ListTools(testContext(t), nil)
			require.NoError(t, err)
			names := []string{}
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			assert.Contains(t, names, riskreview.ToolRequest)
			res, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs(fmt.Sprintf("O2026072801%d", i), "r", ""))
			assert.False(t, isErr, res)
			assert.Equal(t, "SUCCEEDED", res["status"])
		})
	}
}

func TestAuditRecordsCarryDigestsNotReasons(t *testing.T) {
	h := startStack(t, 1, nil)
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	const secret = "customer said the card was stolen on 2026-07-27"
	_, isErr := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728009", secret, "op-audit-00001"))
	require.False(t, isErr)
	out := h.out.String()
	assert.NotContains(t, out, secret)
	assert.NotContains(t, out, "op-audit-00001", "operation ids are hashed")
	for _, field := range []string{`"kind":"tool_call"`, `"request_id"`, `"operation_hash"`, `"business_key":"risk_review|O20260728009|standard|g1"`,
		`"client_principal":"support-assistant"`, `"end_user_principal":"alice"`, `"policy_decision":"allow"`, `"argument_digest":"sha256:`} {
		assert.Contains(t, out, field)
	}
}

func TestDroppedResponseConvergesThroughTheReconcilerWithOneReview(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, nil, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	cs := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	res, _ := call(t, cs, riskreview.ToolRequest, reviewArgs("O20260728040", "dropped", "op-converge-01"))
	require.Equal(t, "UNKNOWN", res["status"])

	// The reconciler runs on the other replica: nothing is held in memory.
	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Transitions)

	status, isErr := call(t, cs, riskreview.ToolStatus, map[string]any{"review_id": res["review_id"]})
	assert.False(t, isErr)
	assert.Equal(t, "SUCCEEDED", status["status"])
	assert.Equal(t, "committed_and_verified", status["outcome"])
	assert.NotEmpty(t, status["effect_receipt"])
	st := h.Risk.Stats()
	assert.Equal(t, 1, st.CreateCalls, "create was called exactly once")
	assert.Equal(t, 1, st.ReviewsCommitted)
}

// With a required scope, a valid token without it is refused 403 naming
// the scope, before anything runs, and the protected resource metadata
// lists the scope so a client knows to ask for it.
func TestARequiredScopeRefusesATokenWithoutItAndIsAdvertised(t *testing.T) {
	h := startStack(t, 1, map[string]string{"INTENTGATE_REQUIRED_SCOPE": "intentgate.write"})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O20260728004","reason":"scope","operation_id":"op-scope-1"}}}`
	req, err := http.NewRequest(http.MethodPost, h.MCPURLs[0], strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+h.token(t, "ALICE"))
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="intentgate.write"`)
	assert.Equal(t, 0, h.Risk.Stats().CreateCalls)

	meta, err := http.Get(strings.TrimSuffix(h.MCPURLs[0], "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	require.NoError(t, err)
	defer meta.Body.Close()
	data, err := io.ReadAll(meta.Body)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"scopes_supported":["intentgate.write"]`)
}
