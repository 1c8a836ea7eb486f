//go:build linux

package rie

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// sampleHandle is the handle stream-unknown.json names: the one derived
// from client support-assistant, tenant M1, end user user-8c41e2 and
// operation id op-sample-0001.
const sampleHandle = "op_jbgeggtiky5s6ftvdgsvmfwr7u"

// TestReconcilerFunctionUnderEmulatorHandlesStreamAndSchedule runs the real
// reconciler binary under the emulator with the recorded stream batches and
// the scheduled event, against an operation left UNKNOWN by a dropped
// response (the settle window is 0s and the downstream budget 300ms for both
// the test and the function).
func TestReconcilerFunctionUnderEmulatorHandlesStreamAndSchedule(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	ctx := context.Background()

	require.NoError(t, sys.risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	args, err := json.Marshal(riskreview.Args{OrderID: "O20260728001", Reason: "chargeback pattern", OperationID: "op-sample-0001"})
	require.NoError(t, err)
	caller := tools.Caller{ClientID: "support-assistant", UserID: "user-8c41e2", TenantID: "M1"}
	sub, err := sys.app.Executor.Submit(ctx, sys.app.Families[riskreview.ToolRequest], caller, args, "")
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, sub.Operation.State)
	require.Equal(t, sampleHandle, sub.Operation.Handle, "the sample names this operation")

	em := startEmulator(t, b.emulator, b.reconciler, sys.functionEnv("intentgate-reconciler"))
	// A zero-match lookup proves absence only after the settle point (the
	// downstream budget, 300ms here, plus the 0s settle window); a found
	// review needs no wait, but the stream handler reconciles only what is due.
	time.Sleep(time.Until(sys.app.Executor.SettledAt(sub.Operation, 0)))

	t.Run("stream-unknown converges to SUCCEEDED", func(t *testing.T) {
		raw := em.invoke(t, sample(t, "stream-unknown.json"))
		assert.JSONEq(t, `{"batchItemFailures":[]}`, string(raw))
		got, err := sys.app.Store.Get(ctx, sampleHandle)
		require.NoError(t, err)
		assert.Equal(t, operation.StateSucceeded, got.State)
		assert.Equal(t, 1, sys.risk.Stats().CreateCalls, "recovered by lookup, never re-created")
		assert.Contains(t, em.out.String(), `"kind":"reconcile"`, "the bootstrap audited the reconciliation")
	})

	t.Run("stream-ignored touches nothing", func(t *testing.T) {
		lookups := sys.risk.Stats().LookupCalls
		raw := em.invoke(t, sample(t, "stream-ignored.json"))
		assert.JSONEq(t, `{"batchItemFailures":[]}`, string(raw))
		assert.Equal(t, lookups, sys.risk.Stats().LookupCalls)
	})

	t.Run("stream-poisoned reports only the malformed record", func(t *testing.T) {
		var resp events.DynamoDBEventResponse
		require.NoError(t, json.Unmarshal(em.invoke(t, sample(t, "stream-poisoned.json")), &resp))
		require.Len(t, resp.BatchItemFailures, 1)
		assert.Equal(t, "4421584700000000017450443302", resp.BatchItemFailures[0].ItemIdentifier)
	})

	t.Run("schedule sweeps the due index", func(t *testing.T) {
		raw := em.invoke(t, sample(t, "schedule.json"))
		var rep reconcile.SweepReport
		require.NoError(t, json.Unmarshal(raw, &rep), "a sweep report: %s", raw)
		assert.Contains(t, string(raw), `"Stopped"`)
		assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
		assert.Zero(t, rep.Errors)
	})

	assertStopsClean(t, em)
}
