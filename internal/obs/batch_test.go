package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Within one invocation every metric goes into one EMF document per
// dimension combination, counts summed into one value, latencies kept as a
// value array; nothing is written before Flush.
func TestMetricsOfOneInvocationAreBatchedIntoOneDocumentPerDimensionSet(t *testing.T) {
	var out bytes.Buffer
	ms := NewMetrics(&out, "intentgate", fixedClock).WithBaseDimensions(map[string]string{DimStage: "prod"})
	ctx, batch := ms.StartBatch(context.Background())

	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { ms.ClaimConflict(ctx) })
	}
	wg.Wait()
	ms.StreamRecordFailure(ctx)
	ms.UnknownOldestAge(ctx, 90*time.Second)
	ms.DownstreamLatency(ctx, "risk", 120*time.Millisecond)
	ms.DownstreamLatency(ctx, "risk", 80*time.Millisecond)
	ms.ToolError(ctx, "request_risk_review", "OVERLOADED")
	assert.Zero(t, out.Len(), "nothing written before the invocation ends")

	require.NoError(t, batch.Flush())
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	require.Len(t, lines, 3, "[Stage], [Stage provider], [Stage code tool]: %s", out.String())
	docs := map[string]map[string]any{}
	for _, l := range lines {
		assertEMFConforms(t, append(l, '\n'))
		var doc map[string]any
		require.NoError(t, json.Unmarshal(l, &doc))
		key := "stage"
		if doc["provider"] != nil {
			key = "provider"
		}
		if doc["code"] != nil {
			key = "code"
		}
		docs[key] = doc
	}
	assert.InDelta(t, 5.0, docs["stage"]["claim_conflicts"], 0, "counts are summed into one value")
	assert.InDelta(t, 1.0, docs["stage"]["stream_record_failures"], 0)
	assert.InDelta(t, 90.0, docs["stage"]["unknown_oldest_age_seconds"], 0)
	assert.Len(t, docs["stage"]["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"], 3,
		"one document carries every metric of its dimension set")
	assert.Equal(t, []any{120.0, 80.0}, docs["provider"]["downstream_latency_ms"], "non-count values stay separate")
	assert.InDelta(t, 1.0, docs["code"]["tool_errors"], 0)

	require.NoError(t, batch.Flush())
	assert.Len(t, bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")), 3, "a second Flush writes nothing")
	ms.ClaimConflict(ctx)
	assert.Len(t, bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")), 4, "after Flush, metrics are written at once")
}

func TestMetricsOutsideABatchAreWrittenAtOnce(t *testing.T) {
	var out bytes.Buffer
	ms := NewMetrics(&out, "intentgate", fixedClock)
	ms.ClaimConflict(context.Background())
	assert.Equal(t, 1, bytes.Count(out.Bytes(), []byte("\n")))
}

// EMF takes at most 100 values per metric in one document.
func TestBatchSplitsMoreThanAHundredValuesAcrossDocuments(t *testing.T) {
	var out bytes.Buffer
	ms := NewMetrics(&out, "intentgate", fixedClock)
	ctx, batch := ms.StartBatch(context.Background())
	for i := range 150 {
		ms.DownstreamLatency(ctx, "risk", time.Duration(i)*time.Millisecond)
	}
	require.NoError(t, batch.Flush())
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	require.Len(t, lines, 2)
	var n int
	for _, l := range lines {
		var doc map[string]any
		require.NoError(t, json.Unmarshal(l, &doc))
		n += len(doc["downstream_latency_ms"].([]any))
	}
	assert.Equal(t, 150, n)
}
