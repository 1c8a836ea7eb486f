package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

// The sample events name operations of client support-assistant with
// operation ids op-sample-0001..4 (their handles are derived from those).
var sampleCaller = tools.Caller{ClientID: "support-assistant", UserID: "user-8c41e2", TenantID: "M1"}

type harness struct {
	r     *reconciler
	sim   *riskapi.Server
	clock *testclock.Clock
	st    *store.Store
	out   *bytes.Buffer
}

// newHarness builds the function exactly as main does, from environment
// values, against the test engine and a Risk API simulator on loopback;
// only the clock and stdout are replaced.
func newHarness(t *testing.T) harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with extra environment values.
func newHarnessWith(t *testing.T, extra map[string]string) harness {
	t.Helper()
	ctx := context.Background()
	sim := riskapi.New(riskapi.Config{APIKey: "sim-key", HoldLimit: 5 * time.Second})
	server := httptest.NewServer(sim)
	t.Cleanup(server.Close)
	table := enginetest.TableName(t)
	env := map[string]string{
		"INTENTGATE_TABLE": table, "INTENTGATE_DYNAMODB_ENDPOINT": engine.Endpoint(), "AWS_REGION": engine.Region(),
		"INTENTGATE_RISK_API_URL": server.URL, "INTENTGATE_RISK_API_KEY": "sim-key",
		"INTENTGATE_DOWNSTREAM_TIMEOUT": "500ms", "INTENTGATE_OPERATOR": "risk-oncall",
		// A shared 2-core machine under load answers the local engine slower
		// than the 300 ms production store budget; nothing here measures it.
		"INTENTGATE_BUDGET_STORE": "3s",
	}
	maps.Copy(env, extra)
	c := testclock.New(time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC))
	out := &bytes.Buffer{}
	r, err := build(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, app.Options{Clock: c.Now, Out: out})
	require.NoError(t, err)
	enginetest.EnsureTable(t, r.app.Store)
	return harness{r: r, sim: sim, clock: c, st: r.app.Store, out: out}
}

// submit makes a first attempt for a sample operation id through the same
// executor the function uses.
func (h harness) submit(t *testing.T, operationID, orderID string) operation.Operation {
	t.Helper()
	args, err := json.Marshal(riskreview.Args{OrderID: orderID, Reason: "chargeback pattern", OperationID: operationID})
	require.NoError(t, err)
	sub, err := h.r.app.Executor.Submit(context.Background(), h.r.app.Families[riskreview.ToolRequest], sampleCaller, args, "")
	require.NoError(t, err)
	return sub.Operation
}

// submitUnknown makes a first attempt whose response the simulator drops
// after committing, so the operation is UNKNOWN.
func (h harness) submitUnknown(t *testing.T, operationID, orderID string) operation.Operation {
	t.Helper()
	require.NoError(t, h.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	op := h.submit(t, operationID, orderID)
	require.Equal(t, operation.StateUnknown, op.State)
	return op
}

// sample reads an event from /events (another helper owns them), falling
// back to testdata/ when absent.
func sample(t *testing.T, name string) json.RawMessage {
	t.Helper()
	for _, p := range []string{filepath.Join("..", "..", "events", name), filepath.Join("testdata", name)} {
		if b, err := os.ReadFile(p); err == nil {
			return b
		}
	}
	t.Fatalf("sample event %s not found", name)
	return nil
}

func invokeStream(t *testing.T, h harness, payload json.RawMessage) events.DynamoDBEventResponse {
	t.Helper()
	out, err := h.r.handle(context.Background(), payload)
	require.NoError(t, err)
	resp, ok := out.(events.DynamoDBEventResponse)
	require.True(t, ok, "stream batches answer with a DynamoDBEventResponse, got %T", out)
	return resp
}

func TestStreamUnknownSampleConvergesToSucceeded(t *testing.T) {
	h := newHarness(t)
	op := h.submitUnknown(t, "op-sample-0001", "O20260728001")
	require.Equal(t, "op_jbgeggtiky5s6ftvdgsvmfwr7u", op.Handle, "the sample names this operation")

	// Past the settle point: the downstream budget (the latest our wait can
	// end) plus the settle window.
	h.clock.Advance(h.r.app.Executor.SettledAt(op, riskreview.DefaultRecovery().SettleWindow).Sub(h.clock.Now()))
	resp := invokeStream(t, h, sample(t, "stream-unknown.json"))
	assert.Empty(t, resp.BatchItemFailures)

	got, err := h.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, tools.Receipt(op.Handle, got.ResourceID), got.Receipt)
	assert.Equal(t, 1, h.sim.Stats().CreateCalls)
	assert.Equal(t, 1, h.sim.Stats().ReviewsCommitted)
	assert.Contains(t, h.out.String(), `"kind":"reconcile"`)
	assert.Contains(t, h.out.String(), `"kind":"transition"`)
}

func TestStreamIgnoredSampleTouchesNothing(t *testing.T) {
	h := newHarness(t)
	resp := invokeStream(t, h, sample(t, "stream-ignored.json"))
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, 0, h.sim.Stats().LookupCalls)
}

func TestStreamPoisonedSampleReportsOnlyThePoisonedRecord(t *testing.T) {
	h := newHarness(t)
	resp := invokeStream(t, h, sample(t, "stream-poisoned.json"))
	require.Len(t, resp.BatchItemFailures, 1)
	assert.Equal(t, "4421584700000000017450443302", resp.BatchItemFailures[0].ItemIdentifier)
	assert.Contains(t, h.out.String(), `"_aws"`, "a stream failure metric was emitted")
}

func TestStreamRecordTheSDKCannotDecodeFailsAlone(t *testing.T) {
	h := newHarness(t)
	payload := json.RawMessage(`{"Records":[
	  {"eventSource":"aws:dynamodb","eventName":"MODIFY","dynamodb":{"SequenceNumber":"1","NewImage":{"state":{"S":"SUCCEEDED"}}}},
	  {"eventSource":"aws:dynamodb","eventName":"MODIFY","dynamodb":{"SequenceNumber":"2","NewImage":{"state":{"Q":"??"}}}}
	]}`)
	resp := invokeStream(t, h, payload)
	require.Len(t, resp.BatchItemFailures, 1)
	assert.Equal(t, "2", resp.BatchItemFailures[0].ItemIdentifier)
}

func TestScheduledEventSweepsTheDueIndex(t *testing.T) {
	h := newHarness(t)
	op := h.submitUnknown(t, "op-sample-0002", "O20260728002")
	h.clock.Advance(time.Minute)

	out, err := h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)
	rep, ok := out.(reconcile.SweepReport)
	require.True(t, ok, "got %T", out)
	assert.Equal(t, 1, rep.Examined)
	assert.Equal(t, 1, rep.ItemsRead)
	assert.Equal(t, reconcile.StoppedDrained, rep.Stopped)
	got, err := h.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, got.State)
}

func TestOtherPayloadsAreRefused(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{
		`{"foo":1}`,
		`{"source":"aws.events","detail-type":"Object Created"}`,
		`{"Records":[{"eventSource":"aws:sqs","messageId":"1"}]}`,
		`[1,2]`,
	} {
		_, err := h.r.handle(context.Background(), json.RawMessage(p))
		assert.ErrorIs(t, err, ErrUnsupportedEvent, p)
	}
}

// emfLines returns the EMF documents in out that carry metric name.
func emfLines(t *testing.T, out *bytes.Buffer, name string) []map[string]any {
	t.Helper()
	var found []map[string]any
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		var doc map[string]any
		if json.Unmarshal(line, &doc) != nil || doc["_aws"] == nil {
			continue
		}
		if _, ok := doc[name]; ok {
			found = append(found, doc)
		}
	}
	return found
}

func TestScheduledSweepEmitsTheOldestUnknownAgeUnderStage(t *testing.T) {
	h := newHarness(t)
	h.submitUnknown(t, "op-sample-0003", "O20260728003")
	h.clock.Advance(3 * time.Minute)

	_, err := h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)

	docs := emfLines(t, h.out, "unknown_oldest_age_seconds")
	require.Len(t, docs, 1, "one age per sweep")
	assert.InDelta(t, 180.0, docs[0]["unknown_oldest_age_seconds"], 0, "age at the sweep, before it resolved the operation")
	assert.Equal(t, "dev", docs[0]["Stage"], "INTENTGATE_STAGE defaults to dev")
	directive := docs[0]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	assert.Equal(t, "intentgate", directive["Namespace"])
	assert.Equal(t, []any{[]any{"Stage"}}, directive["Dimensions"], "exactly the alarm's dimension set")
	assert.Contains(t, directive["Metrics"], map[string]any{"Name": "unknown_oldest_age_seconds", "Unit": "Seconds"},
		"batched with the invocation's other [Stage] metrics in one document")
}

func TestScheduledSweepWithNothingUnknownEmitsZero(t *testing.T) {
	h := newHarness(t)
	_, err := h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)
	docs := emfLines(t, h.out, "unknown_oldest_age_seconds")
	require.Len(t, docs, 1)
	assert.InDelta(t, 0.0, docs[0]["unknown_oldest_age_seconds"], 0)
}

func TestEveryMetricTheReconcilerEmitsCarriesTheStageSet(t *testing.T) {
	h := newHarness(t)
	_ = invokeStream(t, h, sample(t, "stream-poisoned.json")) // stream_record_failures
	_, err := h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)
	n := 0
	for _, line := range bytes.Split(h.out.Bytes(), []byte("\n")) {
		var doc map[string]any
		if json.Unmarshal(line, &doc) != nil || doc["_aws"] == nil {
			continue
		}
		n++
		directive := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		sets := directive["Dimensions"].([]any)
		assert.Equal(t, []any{"Stage"}, sets[len(sets)-1], "last set is exactly [Stage]: %s", line)
	}
	assert.GreaterOrEqual(t, n, 2)
}

func TestScheduledSweepEmitsTheOldestRetryableAgeUnderStage(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	op := h.submit(t, "op-sample-0004", "O20260728004")
	require.Equal(t, operation.StateUnknown, op.State)
	h.clock.Advance(h.r.app.Executor.SettledAt(op, riskreview.DefaultRecovery().SettleWindow).Sub(h.clock.Now()) + time.Second)
	_, err := h.r.handle(context.Background(), sample(t, "schedule.json")) // proves absence: RETRYABLE
	require.NoError(t, err)
	got, err := h.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateRetryable, got.State)

	h.clock.Advance(2 * time.Minute)
	age := h.clock.Now().Sub(op.CreatedAt).Seconds()
	_, err = h.r.handle(context.Background(), sample(t, "schedule.json")) // sees it RETRYABLE, claims it
	require.NoError(t, err)

	docs := emfLines(t, h.out, "retryable_oldest_age_seconds")
	require.Len(t, docs, 2, "one age per sweep")
	assert.InDelta(t, 0.0, docs[0]["retryable_oldest_age_seconds"], 0, "the first sweep saw it UNKNOWN")
	assert.InDelta(t, age, docs[1]["retryable_oldest_age_seconds"], 0.001)
	assert.Equal(t, "dev", docs[1]["Stage"])
}

// A ticket operation this reconciler has no family for (the Release API is
// not configured here) is parked by the sweep and counted for the alarm.
func TestScheduledSweepCountsOperationsNoFamilyCanRun(t *testing.T) {
	h := newHarness(t)
	key, err := operation.NewRequestKey("claude-code", "team-payments", "dev-alice", "create_deployment_ticket", "op-ticket-0001")
	require.NoError(t, err)
	digest, err := operation.RequestDigest(key.Tool, "dev-alice", map[string]string{"service": "payments-api"})
	require.NoError(t, err)
	bk, err := operation.NewBusinessKey("deploy_ticket", "payments-api", "prod", "c0ffee1")
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{
		Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: "dev-alice", TenantID: "team-payments",
		Target: map[string]string{"service": "payments-api"}, Payload: map[string]string{"service": "payments-api"},
	}, h.clock.Now(), time.Minute)
	require.NoError(t, err)
	_, err = h.st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	h.clock.Advance(2 * time.Minute)

	_, err = h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)
	docs := emfLines(t, h.out, "unrunnable_operations")
	require.Len(t, docs, 1, "one count per sweep")
	assert.InDelta(t, 1.0, docs[0]["unrunnable_operations"], 0)
	directive := docs[0]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{[]any{"Stage"}}, directive["Dimensions"], "exactly the alarm's dimension set")

	_, err = h.r.handle(context.Background(), sample(t, "schedule.json"))
	require.NoError(t, err)
	docs = emfLines(t, h.out, "unrunnable_operations")
	require.Len(t, docs, 2)
	assert.InDelta(t, 0.0, docs[1]["unrunnable_operations"], 0, "parked once, counted once")
}
