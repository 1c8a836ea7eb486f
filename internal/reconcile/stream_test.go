package reconcile_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// streamRecord is a MODIFY record whose new image names the operation.
func streamRecord(seq string, op operation.Operation, state operation.State) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventID: "ev-" + seq, EventName: "MODIFY", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{
			SequenceNumber: seq,
			NewImage: map[string]events.DynamoDBAttributeValue{
				"pk":      events.NewStringAttribute("op#" + op.Handle),
				"handle":  events.NewStringAttribute(op.Handle),
				"state":   events.NewStringAttribute(string(state)),
				"version": events.NewNumberAttribute(strconv.FormatInt(op.Version, 10)),
			},
		},
	}
}

func TestStreamHoldsARecordDueSoonThenProbesIt(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	unknown := f.submitUnknown(t, riskapi.CreateDropResponseAfterCommit, "op-stream-held1", orderID(9))
	start := f.clock.Now()

	resp, err := svc.HandleStream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord("300", unknown, operation.StateUnknown),
	}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	got := f.get(t, unknown.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State, "the first probe came from the stream, once the settle window passed")
	assert.Equal(t, unknown.DueAt, f.clock.Now(), "held exactly until due")
	assert.True(t, f.clock.Now().After(start))
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestStreamBatchReportsOnlyThePoisonedRecord(t *testing.T) {
	f := newFixture(t)
	// Due later than the stream may hold it: left to the sweep.
	svc := f.serviceWith(t, func(c *reconcile.Config) { c.MaxStreamWait = time.Second })
	ctx := context.Background()
	unknown := f.submitUnknown(t, riskapi.CreateDropResponseAfterCommit, "op-stream-00001", orderID(7))

	// Fresh from the executor, the UNKNOWN is not due before its settle
	// window, and that is beyond the hold: skipped, not failed.
	resp, err := svc.HandleStream(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord("100", unknown, operation.StateUnknown),
	}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, operation.StateUnknown, f.get(t, unknown.Handle).State)
	assert.Equal(t, 0, f.sim.Stats().LookupCalls)

	f.clock.Advance(riskreviewSettle)
	settled := f.storedOp(t, "op-stream-00002", orderID(8), time.Minute)
	poisoned := streamRecord("201", unknown, operation.StateUnknown)
	delete(poisoned.Change.NewImage, "handle")
	poisoned.Change.NewImage["version"] = events.NewStringAttribute("two")
	gone := streamRecord("203", unknown, operation.StateRetryable)
	gone.Change.NewImage["handle"] = events.NewStringAttribute("op_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	gone.Change.NewImage["pk"] = events.NewStringAttribute("op#op_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	removed := streamRecord("204", unknown, operation.StateUnknown)
	removed.EventName = "REMOVE"

	resp, err = svc.HandleStream(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord("200", settled, operation.StateSucceeded), // entering SUCCEEDED: ignored
		poisoned,
		streamRecord("202", unknown, operation.StateUnknown),
		gone,    // no longer stored: nothing to do, nothing to redeliver
		removed, // TTL removal: ignored
	}})
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
	assert.Equal(t, "201", resp.BatchItemFailures[0].ItemIdentifier)

	got := f.get(t, unknown.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State, "the good record behind the poisoned one was processed")
	assert.Equal(t, operation.StatePending, f.get(t, settled.Handle).State, "the ignored record's operation is untouched")
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestStreamRecordWithStaleImageIsReconciledFromTheStoredOperation(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	op := f.toUnknown(t, f.storedOp(t, "op-stream-stale", orderID(9), time.Minute))
	f.clock.Advance(riskreviewSettle)
	// The image says RETRYABLE at an old version; the store says UNKNOWN.
	old := op
	old.Version = 1
	resp, err := svc.HandleStream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord("300", old, operation.StateRetryable),
	}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, operation.StateRetryable, f.get(t, op.Handle).State, "probed as the UNKNOWN it really is")
	assert.Equal(t, 0, f.sim.Stats().CreateCalls, "not claimed on the image's word")
}

// A stream record of a tool this reconciler has no family for can never
// succeed here; retrying it would hold up the stream shard behind it. It
// is left to the sweep, which parks it and counts it for the alarm.
func TestStreamLeavesAnOperationNoFamilyCanRunToTheSweep(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	ticket := f.toUnknown(t, f.storedOpOf(t, release.ToolCreate, "op-stream-ticket", time.Minute))

	resp, err := svc.HandleStream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord("400", ticket, operation.StateUnknown),
	}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures, "no redelivery: it could never succeed here")
	assert.Equal(t, ticket.Version, f.get(t, ticket.Handle).Version, "nothing written")

	rep, err := svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Unrunnable)
}
