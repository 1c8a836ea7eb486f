package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fixedTime = time.Date(2026, 7, 28, 12, 0, 0, 123_000_000, time.UTC)

func fixedClock() time.Time { return fixedTime }

// emfDoc mirrors the EMF document for decoding in tests.
type emfDoc struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []map[string]any
		}
	} `json:"_aws"`
}

// assertEMFConforms checks one line against the EMF specification's
// structural rules: a root object with _aws.Timestamp (ms) and
// CloudWatchMetrics; each directive has Namespace, at least one dimension
// set of at most 30 keys, and metric definitions with a Name; every
// referenced dimension is a root member with a string value; every metric
// is a root member with a numeric value.
func assertEMFConforms(t *testing.T, line []byte) (emfDoc, map[string]any) {
	t.Helper()
	require.True(t, bytes.HasSuffix(line, []byte("\n")), "one line per metric")
	require.Equal(t, 1, bytes.Count(line, []byte("\n")))

	var root map[string]any
	require.NoError(t, json.Unmarshal(line, &root))
	var doc emfDoc
	require.NoError(t, json.Unmarshal(line, &doc))

	aws, ok := root["_aws"].(map[string]any)
	require.True(t, ok, "_aws must be an object")
	assert.Equal(t, []string{"CloudWatchMetrics", "Timestamp"}, keysOf(aws), "metadata has no extra members")
	require.NotEmpty(t, doc.AWS.CloudWatchMetrics)
	for _, d := range doc.AWS.CloudWatchMetrics {
		assert.NotEmpty(t, d.Namespace)
		require.NotEmpty(t, d.Dimensions, "Dimensions needs at least one set")
		for _, set := range d.Dimensions {
			assert.LessOrEqual(t, len(set), 30)
			for _, k := range set {
				v, ok := root[k].(string)
				assert.True(t, ok, "dimension %q must be a root string member", k)
				assert.NotEmpty(t, v)
			}
		}
		require.NotEmpty(t, d.Metrics)
		assert.LessOrEqual(t, len(d.Metrics), 100)
		for _, def := range d.Metrics {
			name, ok := def["Name"].(string)
			require.True(t, ok, "metric definition needs a Name")
			// A number, or an array of at most 100 numbers (EMF values).
			_, isNum := root[name].(float64)
			if arr, isArr := root[name].([]any); isArr && len(arr) <= 100 {
				isNum = true
				for _, v := range arr {
					_, n := v.(float64)
					isNum = isNum && n
				}
			}
			assert.True(t, isNum, "metric %q must be a root numeric member or array of numbers", name)
			for k := range def {
				assert.Contains(t, []string{"Name", "Unit", "StorageResolution"}, k)
			}
		}
	}
	return doc, root
}

func TestEmitWritesOneSpecConformingEMFLine(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "IntentGate", fixedClock)

	err := m.Emit(context.Background(), Metric{
		Name:       "tool_errors",
		Value:      1,
		Unit:       UnitCount,
		Dimensions: map[string]string{"tool": "create_risk_review", "code": "OVERLOADED"},
	})
	require.NoError(t, err)

	assert.JSONEq(t, `{
		"_aws": {
			"Timestamp": 1785240000123,
			"CloudWatchMetrics": [{
				"Namespace": "IntentGate",
				"Dimensions": [["code", "tool"], []],
				"Metrics": [{"Name": "tool_errors", "Unit": "Count"}]
			}]
		},
		"code": "OVERLOADED",
		"tool": "create_risk_review",
		"tool_errors": 1
	}`, buf.String())

	doc, _ := assertEMFConforms(t, buf.Bytes())
	assert.Equal(t, fixedTime.UnixMilli(), doc.AWS.Timestamp)
}

func TestEmitWithoutDimensionsUsesOneEmptyDimensionSet(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "IntentGate", fixedClock)
	m.Emit(context.Background(), Metric{Name: "claim_conflicts", Value: 2})

	doc, root := assertEMFConforms(t, buf.Bytes())
	assert.Equal(t, [][]string{{}}, doc.AWS.CloudWatchMetrics[0].Dimensions)
	_, hasUnit := doc.AWS.CloudWatchMetrics[0].Metrics[0]["Unit"]
	assert.False(t, hasUnit, "no unit means CloudWatch's default None")
	assert.InDelta(t, 2.0, root["claim_conflicts"], 0)
}

func TestEmitRejectsDocumentsTheSpecForbids(t *testing.T) {
	tooMany := map[string]string{}
	for i := range 31 {
		tooMany[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name      string
		namespace string
		metric    Metric
	}{
		{"empty namespace", "", Metric{Name: "x", Value: 1}},
		{"empty name", "ns", Metric{Name: "", Value: 1}},
		{"reserved name", "ns", Metric{Name: "_aws", Value: 1}},
		{"NaN", "ns", Metric{Name: "x", Value: math.NaN()}},
		{"infinity", "ns", Metric{Name: "x", Value: math.Inf(1)}},
		{"unknown unit", "ns", Metric{Name: "x", Value: 1, Unit: "Widgets"}},
		{"too many dimensions", "ns", Metric{Name: "x", Value: 1, Dimensions: tooMany}},
		{"empty dimension value", "ns", Metric{Name: "x", Value: 1, Dimensions: map[string]string{"tool": ""}}},
		{"dimension named like the metric", "ns", Metric{Name: "x", Value: 1, Dimensions: map[string]string{"x": "v"}}},
		{"dimension named _aws", "ns", Metric{Name: "x", Value: 1, Dimensions: map[string]string{"_aws": "v"}}},
		{"overlong dimension value", "ns", Metric{Name: "x", Value: 1, Dimensions: map[string]string{"k": strings.Repeat("v", 1025)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := NewMetrics(&buf, tc.namespace, fixedClock).Emit(context.Background(), tc.metric)
			assert.Error(t, err)
			assert.Zero(t, buf.Len(), "nothing written for an invalid metric")
		})
	}
}

func TestMetricHelpersEmitTheSystemsMetrics(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		emit  func(m *Metrics)
		want  string
		unit  string
		value float64
		dims  map[string]string
	}{
		{"tool call", func(m *Metrics) { m.ToolCall(ctx, "create_risk_review") },
			"tool_calls", "Count", 1, map[string]string{"tool": "create_risk_review"}},
		{"tool error", func(m *Metrics) { m.ToolError(ctx, "create_risk_review", "CONFLICT") },
			"tool_errors", "Count", 1, map[string]string{"tool": "create_risk_review", "code": "CONFLICT"}},
		{"auth rejection", func(m *Metrics) { m.AuthRejection(ctx, "expired") },
			"auth_rejections", "Count", 1, map[string]string{"reason": "expired"}},
		{"downstream latency", func(m *Metrics) { m.DownstreamLatency(ctx, "risk", 1500*time.Microsecond) },
			"downstream_latency_ms", "Milliseconds", 1.5, map[string]string{"provider": "risk"}},
		{"overloaded", func(m *Metrics) { m.Overloaded(ctx, "create_risk_review", "queue_full") },
			"overloaded", "Count", 1, map[string]string{"tool": "create_risk_review", "reason": "queue_full"}},
		{"unknown", func(m *Metrics) { m.UnknownOperation(ctx, "create_deployment_ticket") },
			"unknown_operations", "Count", 1, map[string]string{"tool": "create_deployment_ticket"}},
		{"escalated", func(m *Metrics) { m.EscalatedOperation(ctx, "create_risk_review", "multiple_effects") },
			"escalated_operations", "Count", 1, map[string]string{"tool": "create_risk_review", "reason": "multiple_effects"}},
		{"probe", func(m *Metrics) { m.ReconcileProbe(ctx, "release", "not_found") },
			"reconcile_probes", "Count", 1, map[string]string{"provider": "release", "result": "not_found"}},
		{"claim conflict", func(m *Metrics) { m.ClaimConflict(ctx) },
			"claim_conflicts", "Count", 1, nil},
		{"stream failure", func(m *Metrics) { m.StreamRecordFailure(ctx) },
			"stream_record_failures", "Count", 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.emit(NewMetrics(&buf, "IntentGate", fixedClock))
			doc, root := assertEMFConforms(t, buf.Bytes())
			d := doc.AWS.CloudWatchMetrics[0]
			assert.Equal(t, "IntentGate", d.Namespace)
			assert.Equal(t, tc.want, d.Metrics[0]["Name"])
			assert.Equal(t, tc.unit, d.Metrics[0]["Unit"])
			assert.InDelta(t, tc.value, root[tc.want], 1e-9)
			for k, v := range tc.dims {
				assert.Equal(t, v, root[k])
			}
			if len(tc.dims) > 0 {
				assert.Len(t, d.Dimensions, 2, "dimensioned set plus the total")
				assert.Len(t, d.Dimensions[0], len(tc.dims))
				assert.Empty(t, d.Dimensions[1])
			} else {
				assert.Equal(t, [][]string{{}}, d.Dimensions)
			}
		})
	}
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestEmitReportsWriterFailure(t *testing.T) {
	err := NewMetrics(failingWriter{}, "ns", nil).Emit(context.Background(), Metric{Name: MetricToolCalls, Value: 1, Unit: UnitCount})
	assert.ErrorIs(t, err, errDiskFull)
}

// The named helpers return nothing: a metric they cannot write (writer
// failure, a value EMF refuses) is logged with its name and the cause.
func TestHelpersLogTheMetricsTheyCannotWrite(t *testing.T) {
	var log bytes.Buffer
	errLog := slog.New(slog.NewJSONHandler(&log, nil))
	NewMetrics(failingWriter{}, "ns", nil).WithErrorLog(errLog).ToolCall(context.Background(), "t")
	assert.Contains(t, log.String(), `"metric":"tool_calls"`)
	assert.Contains(t, log.String(), "disk full")

	log.Reset()
	var out bytes.Buffer
	NewMetrics(&out, "ns", nil).WithErrorLog(errLog).ToolError(context.Background(), "t", "") // empty dimension value
	assert.Empty(t, out.String(), "nothing half-written")
	assert.Contains(t, log.String(), `"metric":"tool_errors"`)
	assert.Contains(t, log.String(), `dimension \"code\" value must be`)
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.ToolCall(context.Background(), "t")
	assert.NoError(t, m.Emit(context.Background(), Metric{Name: "x", Value: 1}))
}

func TestBaseDimensionsJoinEveryMetricAndReplaceTheEmptyAggregate(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "intentgate", fixedClock).WithBaseDimensions(map[string]string{DimStage: "prod"})

	m.EscalatedOperation(context.Background(), "create_risk_review", "multiple_effects")

	assert.JSONEq(t, `{
		"_aws": {
			"Timestamp": 1785240000123,
			"CloudWatchMetrics": [{
				"Namespace": "intentgate",
				"Dimensions": [["Stage", "reason", "tool"], ["Stage"]],
				"Metrics": [{"Name": "escalated_operations", "Unit": "Count"}]
			}]
		},
		"Stage": "prod",
		"reason": "multiple_effects",
		"tool": "create_risk_review",
		"escalated_operations": 1
	}`, buf.String())
	assertEMFConforms(t, buf.Bytes())
}

func TestBaseDimensionsAloneAreTheOnlySetOfAnUndimensionedMetric(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf, "intentgate", fixedClock).WithBaseDimensions(map[string]string{DimStage: "dev"})

	m.UnknownOldestAge(context.Background(), 90*time.Second+500*time.Millisecond)

	assert.JSONEq(t, `{
		"_aws": {
			"Timestamp": 1785240000123,
			"CloudWatchMetrics": [{
				"Namespace": "intentgate",
				"Dimensions": [["Stage"]],
				"Metrics": [{"Name": "unknown_oldest_age_seconds", "Unit": "Seconds"}]
			}]
		},
		"Stage": "dev",
		"unknown_oldest_age_seconds": 90.5
	}`, buf.String())
	assertEMFConforms(t, buf.Bytes())
}

func TestEveryHelperPublishesUnderExactlyTheBaseSet(t *testing.T) {
	ctx := context.Background()
	helpers := map[string]func(m *Metrics){
		"tool call":          func(m *Metrics) { m.ToolCall(ctx, "t") },
		"tool error":         func(m *Metrics) { m.ToolError(ctx, "t", "CONFLICT") },
		"auth rejection":     func(m *Metrics) { m.AuthRejection(ctx, "expired") },
		"downstream latency": func(m *Metrics) { m.DownstreamLatency(ctx, "risk", time.Second) },
		"overloaded":         func(m *Metrics) { m.Overloaded(ctx, "t", "queue_full") },
		"unknown":            func(m *Metrics) { m.UnknownOperation(ctx, "t") },
		"escalated":          func(m *Metrics) { m.EscalatedOperation(ctx, "t", "probe_budget") },
		"probe":              func(m *Metrics) { m.ReconcileProbe(ctx, "risk", "found") },
		"claim conflict":     func(m *Metrics) { m.ClaimConflict(ctx) },
		"stream failure":     func(m *Metrics) { m.StreamRecordFailure(ctx) },
		"unknown oldest age": func(m *Metrics) { m.UnknownOldestAge(ctx, 0) },
	}
	for name, emit := range helpers {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			emit(NewMetrics(&buf, "intentgate", fixedClock).WithBaseDimensions(map[string]string{DimStage: "prod"}))
			doc, root := assertEMFConforms(t, buf.Bytes())
			sets := doc.AWS.CloudWatchMetrics[0].Dimensions
			assert.Equal(t, []string{"Stage"}, sets[len(sets)-1], "the last set is exactly [Stage]")
			for _, set := range sets {
				assert.Contains(t, set, "Stage", "no set without Stage")
			}
			assert.Equal(t, "prod", root["Stage"])
		})
	}
}

func TestWithBaseDimensionsLeavesTheOriginalUnchanged(t *testing.T) {
	var buf bytes.Buffer
	dims := map[string]string{DimStage: "prod"}
	plain := NewMetrics(&buf, "ns", fixedClock)
	staged := plain.WithBaseDimensions(dims)
	dims[DimStage] = "mutated after the call"

	plain.ClaimConflict(context.Background())
	staged.ClaimConflict(context.Background())

	lines := strings.SplitAfter(buf.String(), "\n")
	require.Len(t, lines, 3) // two lines and the empty rest
	doc, _ := assertEMFConforms(t, []byte(lines[0]))
	assert.Equal(t, [][]string{{}}, doc.AWS.CloudWatchMetrics[0].Dimensions)
	doc, root := assertEMFConforms(t, []byte(lines[1]))
	assert.Equal(t, [][]string{{"Stage"}}, doc.AWS.CloudWatchMetrics[0].Dimensions)
	assert.Equal(t, "prod", root["Stage"], "the base map was copied")
}

func TestBaseDimensionsAreValidatedLikeOwnOnes(t *testing.T) {
	nearlyFull := map[string]string{}
	for i := range 30 {
		nearlyFull[strings.Repeat("b", i+1)] = "v"
	}
	tests := []struct {
		name   string
		base   map[string]string
		metric Metric
	}{
		{"empty base value", map[string]string{DimStage: ""}, Metric{Name: "x", Value: 1}},
		{"base named like the metric", map[string]string{"x": "v"}, Metric{Name: "x", Value: 1}},
		{"metric repeats a base dimension", map[string]string{DimStage: "prod"},
			Metric{Name: "x", Value: 1, Dimensions: map[string]string{DimStage: "dev"}}},
		{"base plus own over 30", nearlyFull, Metric{Name: "x", Value: 1, Dimensions: map[string]string{"tool": "t"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := NewMetrics(&buf, "ns", fixedClock).WithBaseDimensions(tc.base).Emit(context.Background(), tc.metric)
			assert.Error(t, err)
			assert.Zero(t, buf.Len())
		})
	}
}

func TestUnknownOldestAgeNeverGoesNegative(t *testing.T) {
	var buf bytes.Buffer
	NewMetrics(&buf, "ns", fixedClock).UnknownOldestAge(context.Background(), -time.Second)
	_, root := assertEMFConforms(t, buf.Bytes())
	assert.InDelta(t, 0.0, root[MetricUnknownOldestAge], 0)
}

func TestValidUnitsAreTheEMFSchemaList(t *testing.T) {
	for _, u := range []string{"Seconds", "Microseconds", "Milliseconds",
		"Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
		"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
		"Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
		"Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second",
		"Count/Second", "None"} {
		assert.True(t, validUnit(u), u)
	}
	for _, u := range []string{"", "count", "Widgets", "ms", "Seconds/Second"} {
		assert.False(t, validUnit(u), u)
	}
}
