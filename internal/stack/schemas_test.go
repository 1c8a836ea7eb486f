package stack_test

import (
	"sort"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// TestEveryToolAndCodeConformsToItsOutputSchema drives each tool through
// the results a caller meets (success, and each refusal or unfinished
// outcome the tool can give through MCP) and checks every one against the
// advertised outputSchema with an independent validator (call does that
// for every result of this package's tests). The table of tool and code
// pairs is the specification: a pair the scenario no longer produces fails
// the test as loudly as a result that does not conform.
func TestEveryToolAndCodeConformsToItsOutputSchema(t *testing.T) {
	// A generous store budget: this test is about result shapes, and a
	// loaded machine must not turn a success into TEMPORARY_UNAVAILABLE.
	h := startStackWith(t, 1, map[string]string{"INTENTGATE_BUDGET_STORE": "3s"},
		stack.Config{Clock: newTestClock().Now, ReleaseSearchLag: searchLag})
	r := ticketRig{harness: h, deployer: connect(t, h.MCPURLs[0], h.token(t, "DEPLOYER"), protocolNew)}
	url := r.MCPURLs[0]
	alice := connect(t, url, r.token(t, "ALICE"), protocolNew)
	bob := connect(t, url, r.token(t, "BOB"), protocolOld)
	operator := connect(t, url, r.token(t, "OPERATOR"), protocolNew)
	seen := map[string]bool{}
	do := func(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		body, isErr := call(t, cs, tool, args)
		code, _ := body["code"].(string)
		if !isErr {
			code = "success"
		}
		seen[tool+" "+code] = true
		return body
	}
	const unknownHandle = "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"

	// request_risk_review and get_risk_review_status.
	review := do(alice, riskreview.ToolRequest, reviewArgs("O20260728001", "chargeback pattern", "op-schema-risk-01"))
	do(alice, riskreview.ToolRequest, reviewArgs("O20260728001", "another reason", "op-schema-risk-01"))
	do(bob, riskreview.ToolRequest, reviewArgs("O20260728001", "not mine", "op-schema-risk-02"))
	do(alice, riskreview.ToolRequest, map[string]any{"order_id": "O20260728001", "reason": ""})
	require.NoError(t, r.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	do(alice, riskreview.ToolRequest, reviewArgs("O20260728002", "velocity", "op-schema-risk-03"))
	do(alice, riskreview.ToolStatus, map[string]any{"review_id": review["review_id"]})
	do(alice, riskreview.ToolStatus, map[string]any{"review_id": unknownHandle})
	do(alice, riskreview.ToolStatus, map[string]any{"review_id": "R-1"})

	// create_deployment_ticket, approve_rollout, get_operation.
	do(r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-schema-ok-01"))
	do(r.deployer, release.ToolCreate, ticketArgs("8bc911e", "deploy-schema-ok-01"))
	do(r.deployer, release.ToolCreate, map[string]any{"service": "search-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"})
	do(r.deployer, release.ToolCreate, ticketArgs("not-hex", "deploy-schema-bad-1"))
	r.setFaults(t, releaseapi.Faults{
		Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}},
		Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchHide, Times: 100}},
	})
	do(r.deployer, release.ToolCreate, ticketArgs("9ac911d", "deploy-schema-unk-1"))
	do(r.deployer, release.ToolApprove, map[string]any{"operation_id": "deploy-schema-ok-01"})
	do(r.deployer, release.ToolApprove, map[string]any{"operation_id": "deploy-schema-unk-1"})
	do(r.deployer, release.ToolApprove, map[string]any{"ticket_handle": unknownHandle})
	do(r.deployer, release.ToolApprove, map[string]any{"operation_id": "deploy-schema-ok-01", "ticket_handle": unknownHandle})
	do(r.deployer, packet.ToolGetOperation, map[string]any{"operation_id": "deploy-schema-ok-01"})
	do(r.deployer, packet.ToolGetOperation, map[string]any{"handle": unknownHandle})
	do(r.deployer, packet.ToolGetOperation, map[string]any{})

	// resolve_operation.
	okPacket := do(r.deployer, packet.ToolGetOperation, map[string]any{"operation_id": "deploy-schema-ok-01"})
	resolve := func(handle any) map[string]any {
		return map[string]any{"handle": handle, "resolution": "FAILED", "evidence": "checked the provider"}
	}
	do(r.deployer, packet.ToolResolveOperation, resolve(okPacket["handle"]))
	do(operator, packet.ToolResolveOperation, resolve(okPacket["handle"]))
	do(operator, packet.ToolResolveOperation, resolve(unknownHandle))
	do(operator, packet.ToolResolveOperation, map[string]any{"handle": unknownHandle})

	want := []string{
		"request_risk_review success", "request_risk_review IDEMPOTENCY_CONFLICT", "request_risk_review FORBIDDEN",
		"request_risk_review INVALID_ARGUMENT", "request_risk_review OPERATION_UNKNOWN",
		"get_risk_review_status success", "get_risk_review_status NOT_FOUND", "get_risk_review_status INVALID_ARGUMENT",
		"create_deployment_ticket success", "create_deployment_ticket IDEMPOTENCY_CONFLICT", "create_deployment_ticket FORBIDDEN",
		"create_deployment_ticket INVALID_ARGUMENT", "create_deployment_ticket OPERATION_UNKNOWN",
		"approve_rollout success", "approve_rollout PRECONDITION_FAILED", "approve_rollout NOT_FOUND", "approve_rollout INVALID_ARGUMENT",
		"get_operation success", "get_operation NOT_FOUND", "get_operation INVALID_ARGUMENT",
		"resolve_operation FORBIDDEN", "resolve_operation PRECONDITION_FAILED", "resolve_operation NOT_FOUND", "resolve_operation INVALID_ARGUMENT",
	}
	var got []string
	for pair := range seen {
		got = append(got, pair)
	}
	sort.Strings(want)
	sort.Strings(got)
	assert.Equal(t, want, got)
}
