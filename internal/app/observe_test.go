package app

import (
	"bytes"
	"context"
	"encoding/json"
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
	owner := operation.Operation{Key: operation.RequestKey{ClientID: "support-assistant"}, EndUserID: "alice", State: operation.StateEscalated}
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
	assert.Equal(t, "alice", byOperator["end_user_principal"], "the owner, as on every transition record")
	assert.Equal(t, "ticket-9001", byOperator["resource_id"])
	assert.Equal(t, "seen in the console (INC-42)", byOperator["detail"])
	assert.Equal(t, "platform-oncall", byReconciler["actor"])
	for _, k := range []string{"resource_id", "detail"} {
		assert.NotContains(t, byReconciler, k)
	}
}
