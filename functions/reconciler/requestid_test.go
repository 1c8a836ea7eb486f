package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// Every audit record carries the id of the request that wrote it
// (docs/deploy.md, "Traces and logs"): for the reconciler that is the
// Lambda invocation's request id, the one on the function's START, END and
// REPORT lines and on its errors, and the only key that joins a
// transition the reconciler made to the invocation that made it.
func TestReconcilerAuditRecordsCarryTheLambdaRequestID(t *testing.T) {
	h := newHarness(t)
	op := h.submitUnknown(t, "op-sample-0001", "O20260728001")
	h.clock.Advance(h.r.app.Executor.SettledAt(op, riskreview.DefaultRecovery().SettleWindow).Sub(h.clock.Now()))
	h.out.Reset()

	const lambdaRequestID = "3f1c2b7e-9a4d-4e21-8c55-0b6d2e9f7a10"
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: lambdaRequestID})
	_, err := h.r.handle(ctx, sample(t, "stream-unknown.json"))
	require.NoError(t, err)

	var audits int
	sc := bufio.NewScanner(strings.NewReader(h.out.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != obs.AuditMessage {
			continue
		}
		audits++
		assert.Equal(t, lambdaRequestID, line["request_id"], "audit record %v", line)
	}
	require.NoError(t, sc.Err())
	assert.GreaterOrEqual(t, audits, 2, "a reconcile record and a transition record")
}
