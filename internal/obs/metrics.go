package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

// Units used by this project (CloudWatch MetricDatum units).
const (
	UnitCount        = "Count"
	UnitMilliseconds = "Milliseconds"
	UnitSeconds      = "Seconds"
)

// validUnit reports whether u is in the unit list of the EMF JSON schema.
func validUnit(u string) bool {
	switch u {
	case "Seconds", "Microseconds", "Milliseconds",
		"Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
		"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits",
		"Percent", "Count",
		"Bytes/Second", "Kilobytes/Second", "Megabytes/Second",
		"Gigabytes/Second", "Terabytes/Second",
		"Bits/Second", "Kilobits/Second", "Megabits/Second",
		"Gigabits/Second", "Terabits/Second",
		"Count/Second", "None":
		return true
	}
	return false
}

// EMF limits from the specification.
const (
	emfMaxNamespace    = 1024
	emfMaxMetricName   = 1024
	emfMaxDimensions   = 30
	emfMaxDimensionKey = 250
	emfMaxDimensionVal = 1024
	emfMetadataKey     = "_aws"
)

// Metric names the system emits. Alarms in template.yaml refer to these.
const (
	MetricToolCalls            = "tool_calls"
	MetricToolErrors           = "tool_errors"
	MetricAuthRejections       = "auth_rejections"
	MetricDownstreamLatency    = "downstream_latency_ms"
	MetricOverloaded           = "overloaded"
	MetricUnknownOperations    = "unknown_operations"
	MetricEscalatedOperations  = "escalated_operations"
	MetricReconcileProbes      = "reconcile_probes"
	MetricClaimConflicts       = "claim_conflicts"
	MetricStreamRecordFailures = "stream_record_failures"
	MetricUnknownOldestAge     = "unknown_oldest_age_seconds"
	MetricRetryableOldestAge   = "retryable_oldest_age_seconds"
	// MetricInvalidTokens counts refused tokens that were presented and
	// invalid; missing and expired tokens are normal MCP client behaviour
	// and only in MetricAuthRejections.
	MetricInvalidTokens = "auth_invalid_tokens"
	// MetricColdStarts counts the first invocation of each function process.
	MetricColdStarts = "cold_starts"
	MetricUnrunnable = "unrunnable_operations"
	// MetricSweepFailures is how many operations one sweep could not
	// reconcile (each is tried again by the next sweep).
	MetricSweepFailures = "sweep_operation_failures"
)

// Dimension names used by the helpers. Values must come from small, fixed
// vocabularies (tool names, result codes): every distinct value is a new
// CloudWatch metric, so never use ids or principals as dimensions.
const (
	DimTool     = "tool"
	DimCode     = "code"
	DimReason   = "reason"
	DimProvider = "provider"
	DimResult   = "result"
	DimFunction = "function"
	// DimStage is the base dimension internal/app sets on every metric
	// (INTENTGATE_STAGE); the alarms in template.yaml select on it alone.
	DimStage = "Stage"
)

// Metric is one value to publish.
type Metric struct {
	Name       string
	Value      float64
	Unit       string            // UnitCount, UnitMilliseconds, or another CloudWatch unit; "" = None
	Dimensions map[string]string // low-cardinality key/values; may be empty
}

// Metrics writes CloudWatch Embedded Metric Format lines: one JSON object
// per line, which CloudWatch Logs turns into metrics without any API call.
// Safe for concurrent use: each line is built in memory and written with a
// single Write under a lock.
type Metrics struct {
	out       *lockedWriter
	namespace string
	clock     func() time.Time
	base      map[string]string // added to every metric; never mutated after construction
	errLog    *slog.Logger      // where the helpers report a metric they could not write
}

// lockedWriter is shared by a Metrics and its WithBaseDimensions copies, so
// lines written through any of them never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewMetrics writes to w (os.Stdout under Lambda) in the given CloudWatch
// namespace. clock supplies EMF timestamps; nil means time.Now.
func NewMetrics(w io.Writer, namespace string, clock func() time.Time) *Metrics {
	if w == nil {
		w = io.Discard
	}
	if clock == nil {
		clock = time.Now
	}
	return &Metrics{out: &lockedWriter{w: w}, namespace: namespace, clock: clock,
		errLog: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
}

// WithErrorLog returns a copy of ms whose helpers (ToolCall, ...) log a
// metric they cannot write to l (default: JSON on stderr).
func (ms *Metrics) WithErrorLog(l *slog.Logger) *Metrics {
	if ms == nil || l == nil {
		return ms
	}
	cp := *ms
	cp.errLog = l
	return &cp
}

// WithBaseDimensions returns a copy of ms (same writer, namespace and clock)
// that adds dims to every metric it emits. Their key set also replaces the
// empty aggregate dimension set: every metric is published under exactly
// those keys (e.g. [Stage]) in addition to its own dimensions, which is
// what the alarms select on. dims replaces any base dimensions ms had; it
// is copied. Invalid names or values make Emit fail, like a metric's own.
func (ms *Metrics) WithBaseDimensions(dims map[string]string) *Metrics {
	if ms == nil {
		return nil
	}
	cp := *ms
	cp.base = maps.Clone(dims)
	return &cp
}

type emfMetricDefinition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit,omitempty"`
}

type emfDirective struct {
	Namespace  string                `json:"Namespace"`
	Dimensions [][]string            `json:"Dimensions"`
	Metrics    []emfMetricDefinition `json:"Metrics"`
}

type emfMetadata struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Emit writes m as one EMF line. With base dimension Stage and metric
// dimensions k1, k2:
//
//	{"_aws":{"Timestamp":<ms>,"CloudWatchMetrics":[{"Namespace":ns,
//	  "Dimensions":[["Stage","k1","k2"],["Stage"]],"Metrics":[{"Name":n,"Unit":u}]}]},
//	 "Stage":"prod","k1":"v1","k2":"v2","<n>":<value>}
//
// The second dimension set (the base keys; the empty set when there are
// none) publishes the same value as a total, so alarms can watch "any
// ESCALATED in prod" without listing every dimension value. A metric
// without dimensions of its own gets only that set.
// Errors: invalid input against the EMF limits, a metric dimension that
// repeats a base dimension, or the writer's error.
func (ms *Metrics) Emit(ctx context.Context, m Metric) error {
	if ms == nil {
		return nil
	}
	line, err := ms.encode(m)
	if err != nil {
		return err
	}
	if b := batchFrom(ctx, ms); b != nil && b.add(ms, m) {
		return nil
	}
	if err := ms.write(line); err != nil {
		return fmt.Errorf("obs: write metric %q: %w", m.Name, err)
	}
	return nil
}

// write writes one EMF line (newline added when missing) under the lock.
func (ms *Metrics) write(line []byte) error {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line = append(line, '\n')
	}
	ms.out.mu.Lock()
	defer ms.out.mu.Unlock()
	_, err := ms.out.w.Write(line)
	return err
}

func (ms *Metrics) encode(m Metric) ([]byte, error) {
	if err := ms.validate(m); err != nil {
		return nil, err
	}
	dims := make(map[string]string, len(ms.base)+len(m.Dimensions))
	maps.Copy(dims, ms.base)
	maps.Copy(dims, m.Dimensions)
	keys := slices.Sorted(maps.Keys(dims))
	aggregate := slices.Sorted(maps.Keys(ms.base))
	if aggregate == nil {
		aggregate = []string{} // JSON [] rather than null
	}
	dimensionSets := [][]string{aggregate}
	if len(m.Dimensions) > 0 {
		dimensionSets = [][]string{keys, aggregate}
	}
	doc := make(map[string]any, len(keys)+2)
	doc[emfMetadataKey] = emfMetadata{
		Timestamp: ms.clock().UnixMilli(),
		CloudWatchMetrics: []emfDirective{{
			Namespace:  ms.namespace,
			Dimensions: dimensionSets,
			Metrics:    []emfMetricDefinition{{Name: m.Name, Unit: m.Unit}},
		}},
	}
	for _, k := range keys {
		doc[k] = dims[k]
	}
	doc[m.Name] = m.Value
	line, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("obs: encode metric %q: %w", m.Name, err)
	}
	return append(line, '\n'), nil
}

func (ms *Metrics) validate(m Metric) error {
	switch {
	case ms.namespace == "" || len(ms.namespace) > emfMaxNamespace:
		return fmt.Errorf("obs: metric namespace must be 1..%d characters", emfMaxNamespace)
	case m.Name == "" || len(m.Name) > emfMaxMetricName:
		return fmt.Errorf("obs: metric name must be 1..%d characters", emfMaxMetricName)
	case m.Name == emfMetadataKey:
		return fmt.Errorf("obs: metric name %q is reserved", m.Name)
	case math.IsNaN(m.Value) || math.IsInf(m.Value, 0):
		return fmt.Errorf("obs: metric %q: value %v is not a finite number", m.Name, m.Value)
	case m.Unit != "" && !validUnit(m.Unit):
		return fmt.Errorf("obs: metric %q: unit %q is not a CloudWatch unit", m.Name, m.Unit)
	case len(m.Dimensions)+len(ms.base) > emfMaxDimensions:
		return fmt.Errorf("obs: metric %q: %d dimensions (base included), at most %d",
			m.Name, len(m.Dimensions)+len(ms.base), emfMaxDimensions)
	}
	for k := range m.Dimensions {
		if _, ok := ms.base[k]; ok {
			return fmt.Errorf("obs: metric %q: dimension %q repeats a base dimension", m.Name, k)
		}
	}
	for k, v := range mergedForCheck(ms.base, m.Dimensions) {
		switch {
		case k == "" || len(k) > emfMaxDimensionKey:
			return fmt.Errorf("obs: metric %q: dimension name must be 1..%d characters", m.Name, emfMaxDimensionKey)
		case k == emfMetadataKey || k == m.Name:
			return fmt.Errorf("obs: metric %q: dimension name %q collides with the metric document", m.Name, k)
		case v == "" || len(v) > emfMaxDimensionVal:
			return fmt.Errorf("obs: metric %q: dimension %q value must be 1..%d characters", m.Name, k, emfMaxDimensionVal)
		}
	}
	return nil
}

// mergedForCheck yields base and metric dimensions for validation.
func mergedForCheck(base, own map[string]string) map[string]string {
	if len(base) == 0 {
		return own
	}
	all := maps.Clone(base)
	maps.Copy(all, own)
	return all
}

func (ms *Metrics) count(ctx context.Context, name string, dims map[string]string) {
	ms.record(ctx, Metric{Name: name, Value: 1, Unit: UnitCount, Dimensions: dims})
}

// record is Emit for the named helpers below: a metric that cannot be
// written is logged, not returned. Its callers are in the middle of a tool
// call or a sweep, and a lost metric must neither fail nor be silently
// dropped by them.
func (ms *Metrics) record(ctx context.Context, m Metric) {
	if err := ms.Emit(ctx, m); err != nil && ms.errLog != nil {
		ms.errLog.ErrorContext(ctx, "metric dropped", "metric", m.Name, "error", err.Error())
	}
}

// ToolCall counts one tool call.
func (ms *Metrics) ToolCall(ctx context.Context, tool string) {
	ms.count(ctx, MetricToolCalls, map[string]string{DimTool: tool})
}

// ToolError counts a call that ended with an error result, by stable code.
func (ms *Metrics) ToolError(ctx context.Context, tool, code string) {
	ms.count(ctx, MetricToolErrors, map[string]string{DimTool: tool, DimCode: code})
}

// AuthRejection counts a request refused before MCP (missing/invalid token).
// reason must be a fixed vocabulary (e.g. "missing", "expired", "audience").
func (ms *Metrics) AuthRejection(ctx context.Context, reason string) {
	ms.count(ctx, MetricAuthRejections, map[string]string{DimReason: reason})
}

// DownstreamLatency records one provider call's latency in milliseconds.
func (ms *Metrics) DownstreamLatency(ctx context.Context, provider string, d time.Duration) {
	ms.record(ctx, Metric{
		Name:       MetricDownstreamLatency,
		Value:      float64(d) / float64(time.Millisecond),
		Unit:       UnitMilliseconds,
		Dimensions: map[string]string{DimProvider: provider},
	})
}

// Overloaded counts a call refused by the admission gate (reason queue_full
// or wait_exceeded).
func (ms *Metrics) Overloaded(ctx context.Context, tool, reason string) {
	ms.count(ctx, MetricOverloaded, map[string]string{DimTool: tool, DimReason: reason})
}

// UnknownOperation counts an operation entering UNKNOWN.
func (ms *Metrics) UnknownOperation(ctx context.Context, tool string) {
	ms.count(ctx, MetricUnknownOperations, map[string]string{DimTool: tool})
}

// EscalatedOperation counts an operation entering ESCALATED, by cause
// (e.g. "multiple_effects", "probe_budget", "retry_budget").
func (ms *Metrics) EscalatedOperation(ctx context.Context, tool, cause string) {
	ms.count(ctx, MetricEscalatedOperations, map[string]string{DimTool: tool, DimReason: cause})
}

// ReconcileProbe counts one reconciler probe by provider and result
// (e.g. "found", "not_found", "inconclusive", "multiple", "error").
func (ms *Metrics) ReconcileProbe(ctx context.Context, provider, result string) {
	ms.count(ctx, MetricReconcileProbes, map[string]string{DimProvider: provider, DimResult: result})
}

// ClaimConflict counts a reconciler claim lost to another worker's CAS.
func (ms *Metrics) ClaimConflict(ctx context.Context) {
	ms.count(ctx, MetricClaimConflicts, nil)
}

// StreamRecordFailure counts a stream record reported back as a batch item
// failure.
func (ms *Metrics) StreamRecordFailure(ctx context.Context) {
	ms.count(ctx, MetricStreamRecordFailures, nil)
}

// UnknownOldestAge records the age of the oldest UNKNOWN operation a sweep
// examined (0 when it saw none), in seconds: the UNKNOWN-too-old alarm
// watches its maximum.
func (ms *Metrics) UnknownOldestAge(ctx context.Context, d time.Duration) {
	ms.record(ctx, Metric{Name: MetricUnknownOldestAge, Value: max(d, 0).Seconds(), Unit: UnitSeconds})
}

// RetryableOldestAge records the age of the oldest RETRYABLE operation a
// sweep examined (0 when it saw none), in seconds, for the RETRYABLE-too-old
// alarm.
func (ms *Metrics) RetryableOldestAge(ctx context.Context, d time.Duration) {
	ms.record(ctx, Metric{Name: MetricRetryableOldestAge, Value: max(d, 0).Seconds(), Unit: UnitSeconds})
}

// InvalidToken counts a presented token refused as invalid, by reason.
func (ms *Metrics) InvalidToken(ctx context.Context, reason string) {
	ms.count(ctx, MetricInvalidTokens, map[string]string{DimReason: reason})
}

// ColdStart counts the first invocation of a function process.
func (ms *Metrics) ColdStart(ctx context.Context, function string) {
	ms.count(ctx, MetricColdStarts, map[string]string{DimFunction: function})
}

// SweepFailures records how many operations one sweep could not reconcile
// (0 when none): an undecodable due item, a store or provider error. The
// sweep-failures alarm fires only when every sweep for several minutes had
// one, which a transient error does not cause.
func (ms *Metrics) SweepFailures(ctx context.Context, n int) {
	ms.record(ctx, Metric{Name: MetricSweepFailures, Value: float64(max(n, 0)), Unit: UnitCount})
}

// UnrunnableOperations records how many operations of a tool the reconciler
// has no family for one sweep found and parked (0 when none): the
// unrunnable-operations alarm watches its maximum.
func (ms *Metrics) UnrunnableOperations(ctx context.Context, n int) {
	ms.record(ctx, Metric{Name: MetricUnrunnable, Value: float64(max(n, 0)), Unit: UnitCount})
}
