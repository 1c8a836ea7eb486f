package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
)

// A transition an operator drove names the operator (the record's
// principals are the operation owner's) with what the resolution names
// and why; the reconciler's transitions name their actor (the escalation's
// owner) but keep resource ids and details, a provider's text among them,
// in the journal.
func TestATransitionAnOperatorDroveNamesTheOperatorAndWhy(t *testing.T) {
	var out bytes.Buffer
	hook := observe(obs.NewAuditor(&out), obs.NewMetrics(&bytes.Buffer{}, "test", time.Now))
	owner := operation.Operation{Key: operation.RequestKey{ClientID: "support-assistant"}, Handle: "op_" + strings.Repeat("a", 26),
		EndUserID: "alice", State: operation.StateEscalated}
	settled := owner
	settled.State = operation.StateSucceeded
	hook(context.Background(), tools.TransitionReport{Tool: "create_deployment_ticket", From: owner, To: settled,
		Event: operation.Event{Type: operation.EventOperatorSucceeded, Source: operatortools.SourceOperator, Actor: "oscar",
			ResourceID: "ticket-9001", Detail: "seen in the console (INC-42)"}})
	hook(context.Background(), tools.TransitionReport{Tool: "create_deployment_ticket", From: owner, To: settled,
		Event: operation.Event{Type: operation.EventResendUnsafe, Source: "reconciler", Actor: "platform-oncall",
			ResourceID: "ticket-9001", Detail: "provider says: internal detail"}})

	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var byOperator, byReconciler map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &byOperator))
	require.NoError(t, json.Unmarshal(lines[1], &byReconciler))
	assert.Equal(t, "oscar", byOperator["actor"])
	assert.Equal(t, settled.Handle, byOperator["handle"], "the handle get_operation takes")
	assert.Equal(t, "alice", byOperator["end_user_principal"], "the owner, as on every transition record")
	assert.Equal(t, "ticket-9001", byOperator["resource_id"])
	assert.Equal(t, "seen in the console (INC-42)", byOperator["detail"])
	assert.Equal(t, "platform-oncall", byReconciler["actor"])
	for _, k := range []string{"resource_id", "detail"} {
		assert.NotContains(t, byReconciler, k)
	}
}

// escalationsCounted runs the transitions through the hook and returns
// the escalated_operations documents' reasons, in order.
func escalationsCounted(t *testing.T, reports ...tools.TransitionReport) []string {
	t.Helper()
	var metrics bytes.Buffer
	hook := observe(obs.NewAuditor(&bytes.Buffer{}), obs.NewMetrics(&metrics, "test", time.Now))
	for _, r := range reports {
		hook(context.Background(), r)
	}
	var reasons []string
	for _, line := range bytes.Split(bytes.TrimSpace(metrics.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal(line, &doc))
		if _, ok := doc[obs.MetricEscalatedOperations]; ok {
			reasons = append(reasons, doc[obs.DimReason].(string))
		}
	}
	return reasons
}

// The escalated alarm pages the operator once per operation that needs
// one: when it enters ESCALATED, not again for each piece of evidence a
// stale dispatcher journals on it; and when a verified effect is reported
// for an operation that had FAILED (proven no effect, its business key
// released), which needs an operator as much as an incident does.
func TestTheEscalatedAlarmCountsEachOperationThatNeedsAnOperatorOnce(t *testing.T) {
	op := func(s operation.State) operation.Operation {
		return operation.Operation{Key: operation.RequestKey{ClientID: "c", Tool: "create_deployment_ticket"}, State: s}
	}
	report := func(from, to operation.State, ev operation.EventType) tools.TransitionReport {
		return tools.TransitionReport{Tool: "create_deployment_ticket", From: op(from), To: op(to), Event: operation.Event{Type: ev, ResourceID: "ticket-9"}}
	}
	assert.Equal(t, []string{string(operation.EventProbeMultiple)},
		escalationsCounted(t, report(operation.StateUnknown, operation.StateEscalated, operation.EventProbeMultiple),
			report(operation.StateEscalated, operation.StateEscalated, operation.EventEvidenceRecorded)),
		"entering ESCALATED counts; evidence on it afterwards does not")
	assert.Equal(t, []string{"effect_after_failure"},
		escalationsCounted(t, report(operation.StateFailed, operation.StateFailed, operation.EventEvidenceRecorded)),
		"a verified effect of a FAILED operation needs an operator")
	assert.Equal(t, []string{string(operation.EventAuditExhausted)},
		escalationsCounted(t, report(operation.StateFailed, operation.StateFailed, operation.EventAuditExhausted)),
		"a withdrawal's audit that could not finish needs an operator")
	assert.Empty(t, escalationsCounted(t, report(operation.StateFailed, operation.StateFailed, operation.EventAuditClean),
		report(operation.StateFailed, operation.StateFailed, operation.EventAuditDeferred)), "a withdrawal's audit that looks needs nobody")
}

// A FAILED operation whose effect was already reported needs no second
// page for a second id: the operator called for the first reads them all
// (get_operation names every one).
func TestASecondEffectReportedForAFailedOperationDoesNotPageAgain(t *testing.T) {
	already := operation.Operation{Key: operation.RequestKey{ClientID: "c", Tool: "create_deployment_ticket"}, State: operation.StateFailed,
		Journal: []operation.Event{{Type: operation.EventEvidenceRecorded, From: operation.StateFailed, To: operation.StateFailed, ResourceID: "ticket-9"}}}
	second := tools.TransitionReport{Tool: "create_deployment_ticket", From: already, To: already,
		Event: operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "ticket-10"}}
	assert.Empty(t, escalationsCounted(t, second))
}
