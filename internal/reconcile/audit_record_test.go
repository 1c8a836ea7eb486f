package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

// A reconciler's audit record names the operation's handle (what
// get_operation takes, so an alarm leads to the operation without a table
// read) and, when the provider could not be asked or answered with an
// error, why: on-call counts failed probes by error_class.
func TestAReconcileRecordNamesTheHandleAndWhyTheProbeFailed(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	ctx := context.Background()
	f.faults(t, riskapi.Faults{
		Create: []riskapi.CreateFault{{Mode: riskapi.CreateError500BeforeCommit, Times: 1}},
		Lookup: []riskapi.LookupFault{{Mode: riskapi.LookupError500, Times: 1}, {Mode: riskapi.LookupTimeout, Times: 1}},
	})
	op := f.submit(t, "op-auditclass-1", orderID(6))
	require.Equal(t, operation.StateUnknown, op.State)

	for range 2 {
		f.clock.Advance(2 * time.Minute)
		res, err := svc.Reconcile(ctx, f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, operation.EventProbeInconclusive, res.Event)
	}

	recs := f.audit.records(t, obs.KindReconcile)
	require.Len(t, recs, 2)
	for _, r := range recs {
		assert.Equal(t, op.Handle, r["handle"])
	}
	assert.Equal(t, "http_500", recs[0]["error_class"])
	assert.Equal(t, "timeout", recs[1]["error_class"])
}
