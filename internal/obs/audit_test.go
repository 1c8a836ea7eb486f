package obs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		out = append(out, m)
	}
	require.NoError(t, sc.Err())
	return out
}

func keysOf(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestAuditRecordWritesEveryFieldUnderItsStableKey(t *testing.T) {
	var buf bytes.Buffer
	a := NewAuditor(&buf)
	opHash := HashID("client-a|create_risk_review", "op-123")

	a.Record(context.Background(), AuditRecord{
		Kind:              KindToolCall,
		RequestID:         "req-1",
		OperationHash:     opHash,
		BusinessKey:       "order-9|fraud|g1",
		Tool:              "create_risk_review",
		ClientPrincipal:   "client-a",
		EndUserPrincipal:  "user-7",
		PolicyDecision:    PolicyAllow,
		ArgumentDigest:    "sha256:abc",
		Status:            "UNKNOWN",
		Outcome:           "dispatch_acknowledged_response_missing",
		FromState:         "PENDING",
		ToState:           "UNKNOWN",
		Event:             "timeout",
		DownstreamLatency: 2500 * time.Millisecond,
		ErrorClass:        "timeout",
		ProbeCount:        3,
		ClaimResult:       "won",
		Code:              "UNKNOWN_OUTCOME",
		Deduplicated:      true,
		Duration:          2750*time.Millisecond + 500*time.Microsecond,
	})

	lines := decodeLines(t, &buf)
	require.Len(t, lines, 1)
	got := lines[0]
	assert.Equal(t, []string{
		"argument_digest", "business_key", "claim_result", "client_principal", "code",
		"deduplicated", "downstream_latency_ms", "duration_ms", "end_user_principal",
		"error_class", "event", "from_state", "kind", "level", "msg", "operation_hash",
		"outcome", "policy_decision", "probe_count", "request_id", "status", "time",
		"to_state", "tool",
	}, keysOf(got))
	assert.Equal(t, AuditMessage, got["msg"])
	assert.Equal(t, "INFO", got["level"])
	assert.Equal(t, "tool_call", got["kind"])
	assert.Equal(t, opHash, got["operation_hash"])
	assert.Equal(t, "allow", got["policy_decision"])
	assert.InDelta(t, 2500.0, got["downstream_latency_ms"], 1e-9)
	assert.InDelta(t, 2750.5, got["duration_ms"], 1e-9)
	assert.InDelta(t, 3.0, got["probe_count"], 1e-9)
	assert.Equal(t, true, got["deduplicated"])
}

func TestAuditRecordOmitsEmptyFields(t *testing.T) {
	var buf bytes.Buffer
	NewAuditor(&buf).Record(context.Background(), AuditRecord{Kind: KindAuthReject, Code: "UNAUTHENTICATED"})

	lines := decodeLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, []string{"code", "kind", "level", "msg", "time"}, keysOf(lines[0]))
}

// The record type is the only way into the audit log, so its field list
// is the list of what can ever be logged. A new field must be added here
// deliberately, and it may not carry raw arguments, reason text or tokens.
func TestAuditRecordHasNoFieldForRawContent(t *testing.T) {
	typ := reflect.TypeFor[AuditRecord]()
	var names []string
	for f := range typ.Fields() {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{
		"Kind", "RequestID", "OperationHash", "Handle", "CallerOperationHash", "BusinessKey", "Tool", "ClientPrincipal",
		"EndUserPrincipal", "Tenant", "PolicyDecision", "ArgumentDigest", "Status", "Outcome",
		"FromState", "ToState", "Event",
		// An operator's resolution: who, the provider's resource id, and
		// the operator's own evidence (at most 1,000 characters, checked by
		// resolve_operation); never a caller's arguments.
		"Actor", "ResourceID", "Detail",
		"DownstreamLatency", "ErrorClass", "ProbeCount",
		"ClaimResult", "Code", "Deduplicated", "Duration",
	}, names)
	for _, n := range names {
		lower := strings.ToLower(n)
		for _, banned := range []string{"token", "reason", "secret", "password", "arguments", "raw"} {
			assert.NotContains(t, lower, banned, "field %s", n)
		}
	}
}

func TestAuditRecordHashesARawOperationID(t *testing.T) {
	var buf bytes.Buffer
	NewAuditor(&buf).Record(context.Background(), AuditRecord{Kind: KindToolCall, OperationHash: "op-raw-key", CallerOperationHash: "op-raw-caller"})

	lines := decodeLines(t, &buf)
	require.Len(t, lines, 1)
	assert.Equal(t, HashID("", "op-raw-key"), lines[0]["operation_hash"])
	assert.Equal(t, HashID("", "op-raw-caller"), lines[0]["caller_operation_hash"])
	assert.NotContains(t, buf.String(), "op-raw-key")
	assert.NotContains(t, buf.String(), "op-raw-caller")
}

func TestAuditRecordNamesTheCallersKeyOnlyWhenItIsAnotherOperations(t *testing.T) {
	var buf bytes.Buffer
	a := NewAuditor(&buf)
	a.Record(context.Background(), AuditRecord{Kind: KindToolCall, OperationHash: HashID("s", "k1"), CallerOperationHash: HashID("s", "k1")})
	a.Record(context.Background(), AuditRecord{Kind: KindToolCall, OperationHash: HashID("s", "k1"), CallerOperationHash: HashID("s", "k2")})

	lines := decodeLines(t, &buf)
	require.Len(t, lines, 2)
	assert.NotContains(t, lines[0], "caller_operation_hash", "the call's own operation: one key")
	assert.Equal(t, HashID("s", "k2"), lines[1]["caller_operation_hash"])
}

func TestHashIDIsStableScopedAndShort(t *testing.T) {
	// Golden value: changing the construction breaks correlation with
	// older logs, so it must be a deliberate decision.
	assert.Equal(t, "h:61b488d0abe38ccd", HashID("client-a|create_risk_review", "op-123"))
	assert.Equal(t, HashID("s", "id"), HashID("s", "id"))
	assert.NotEqual(t, HashID("client-a", "op-1"), HashID("client-b", "op-1"), "scope separates clients")
	assert.NotEqual(t, HashID("ab", "c"), HashID("a", "bc"), "scope and id cannot be re-split")
	assert.Regexp(t, regexp.MustCompile(`^h:[0-9a-f]{16}$`), HashID("", ""))
	assert.True(t, isHashID(HashID("x", "y")))
	assert.False(t, isHashID("h:XYZ"))
	assert.False(t, isHashID("h:0123456789abcdeg"))
}

func TestOperationHashIsScopedByClientTenantSubjectAndTool(t *testing.T) {
	m1 := operation.RequestKey{ClientID: "support-assistant", TenantID: "M1", Subject: "alice", Tool: "request_risk_review", OperationID: "op-00000001"}
	m2, none, otherTool, otherUser := m1, m1, m1, m1
	m2.TenantID, none.TenantID, otherTool.Tool, otherUser.Subject = "M2", "", "create_deployment_ticket", "carol"
	// Golden value, as for HashID: a change breaks correlation with older
	// logs (the key scheme k3, which added the subject, was one).
	assert.Equal(t, "h:bc96264b9f8078b4", OperationHash(m1))
	assert.NotEqual(t, OperationHash(m1), OperationHash(otherUser), "two users of one tenant on one client are two operations")
	assert.Equal(t, OperationHash(m1), OperationHash(m1))
	assert.NotEqual(t, OperationHash(m1), OperationHash(m2), "two tenants on one client and one operation_id are two operations")
	assert.NotEqual(t, OperationHash(m1), OperationHash(none), "no tenant is a scope of its own")
	assert.NotEqual(t, OperationHash(m1), OperationHash(otherTool))
}

func TestAuditorWritesWholeLinesUnderConcurrency(t *testing.T) {
	var buf bytes.Buffer
	a := NewAuditor(&buf)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			a.Record(context.Background(), AuditRecord{Kind: KindTransition, ProbeCount: i + 1})
		})
	}
	wg.Wait()
	assert.Len(t, decodeLines(t, &buf), 50)
}

func TestNilAuditorIsANoOp(t *testing.T) {
	var a *Auditor
	assert.NotPanics(t, func() {
		a.Record(context.Background(), AuditRecord{Kind: KindToolCall})
		a.Logger().Info("dropped")
	})
}
