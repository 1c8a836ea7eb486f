package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// A CloudWatch metric is its namespace, name and exact set of dimension
// names: an alarm or a widget that asks for one the functions never publish
// stays empty (an alarm on it never fires), and nothing reports it.

// metricRef is one metric as the template asks for it.
type metricRef struct {
	where     string // the alarm, or the dashboard widget's title
	namespace string
	name      string
	dims      string // dimension names, sorted and joined
	// stage is the value the Stage dimension (or a SEARCH's Stage filter)
	// asks for; "" when there is none.
	stage string
}

func refOf(where, namespace, name string, dims []string, stage string) metricRef {
	slices.Sort(dims)
	return metricRef{where: where, namespace: namespace, name: name, dims: strings.Join(dims, ","), stage: stage}
}

const templateStage = "test"

func TestEveryAlarmAndDashboardMetricIsOneTheFunctionsPublish(t *testing.T) {
	published := publishedMetrics(t)
	tpl := loadTemplate(t)
	fromLogs := logFilterMetrics(t, tpl)

	refs := append(alarmMetrics(t, tpl), dashboardMetrics(t, tpl)...)
	var ours int
	for _, ref := range refs {
		if strings.HasPrefix(ref.namespace, "AWS/") {
			continue // a service's own metric
		}
		if !assert.Equal(t, metricsNamespace, ref.namespace, "%s reads %s from namespace %q: the functions publish to %q, AWS services to AWS/...",
			ref.where, ref.name, ref.namespace, metricsNamespace) {
			continue
		}
		ours++
		if fromLogs[metricRef{name: ref.name, dims: ref.dims}] {
			continue // its name carries the stage (api_unauthorized_<Stage>)
		}
		assert.Equal(t, templateStage, ref.stage, "%s reads %s without selecting the stack's Stage (Stage=%q)", ref.where, ref.name, ref.stage)
		assert.Contains(t, published[ref.name], ref.dims,
			"%s reads %s with dimensions [%s]; the functions publish it under %q", ref.where, ref.name, ref.dims, published[ref.name])
	}
	require.Positive(t, ours, "no alarm or widget reads a %s metric", metricsNamespace)
}

// publishedMetrics emits every metric the functions have a helper for, as
// an invocation does (one batch, flushed), and returns the dimension sets
// each is published under.
func publishedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	var out bytes.Buffer
	ms := newMetrics(&out, time.Now, templateStage, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, batch := ms.StartBatch(context.Background())
	ms.ToolCall(ctx, "create_risk_review")
	ms.ToolError(ctx, "create_risk_review", "OVERLOADED")
	ms.AuthRejection(ctx, "missing")
	ms.InvalidToken(ctx, "expired")
	ms.DownstreamLatency(ctx, "riskapi", 12*time.Millisecond)
	ms.Overloaded(ctx, "create_risk_review", "queue_full")
	ms.UnknownOperation(ctx, "create_risk_review")
	ms.EscalatedOperation(ctx, "create_risk_review", "probe_budget")
	ms.ReconcileProbe(ctx, "riskapi", "found")
	ms.ClaimConflict(ctx)
	ms.StreamRecordFailure(ctx)
	ms.UnknownOldestAge(ctx, time.Minute)
	ms.RetryableOldestAge(ctx, time.Minute)
	ms.ColdStart(ctx, "intentgate-mcp")
	ms.UnrunnableOperations(ctx, 1)
	ms.SweepFailures(ctx, 1)
	require.NoError(t, batch.Flush())

	published := map[string][]string{}
	for line := range strings.Lines(out.String()) {
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &doc), "EMF line %s", line)
		for _, d := range doc.AWS.CloudWatchMetrics {
			require.Equal(t, metricsNamespace, d.Namespace)
			for _, m := range d.Metrics {
				for _, set := range d.Dimensions {
					dims := slices.Sorted(slices.Values(set))
					if key := strings.Join(dims, ","); !slices.Contains(published[m.Name], key) {
						published[m.Name] = append(published[m.Name], key)
					}
				}
			}
		}
	}
	require.NotEmpty(t, published)
	return published
}

// subStage resolves the scalars the metric definitions use: a plain value,
// !Ref Stage, or !Sub with ${Stage}.
func subStage(t *testing.T, n *yamlNode) string {
	t.Helper()
	require.NotNil(t, n)
	switch n.Tag {
	case "!Ref":
		require.Equal(t, "Stage", n.Value, "line %d: only !Ref Stage is resolved here", n.Line)
		return templateStage
	case "!Sub":
		return strings.ReplaceAll(n.Value, "${Stage}", templateStage)
	}
	require.Equal(t, yaml.ScalarNode, n.Kind, "line %d: expected a scalar", n.Line)
	return n.Value
}

// alarmMetrics are the metrics every alarm reads, plain
// (Namespace/MetricName/Dimensions) or inside metric math (MetricStat).
// Dimensions are resolved for our namespace only (the others name
// resources with !Ref).
func alarmMetrics(t *testing.T, tpl samTemplate) []metricRef {
	t.Helper()
	var refs []metricRef
	var walk func(alarm string, n *yamlNode)
	walk = func(alarm string, n *yamlNode) {
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode && n.get("MetricName") != nil {
			require.NotNil(t, n.get("Namespace"), "alarm %s: a MetricName without a Namespace", alarm)
			ns := subStage(t, n.get("Namespace"))
			var dims []string
			var stage string
			if d := n.get("Dimensions"); d != nil && !strings.HasPrefix(ns, "AWS/") {
				for _, dim := range d.Content {
					name := subStage(t, (*yamlNode)(dim).get("Name"))
					dims = append(dims, name)
					if name == "Stage" {
						stage = subStage(t, (*yamlNode)(dim).get("Value"))
					}
				}
			}
			refs = append(refs, refOf("alarm "+alarm, ns, subStage(t, n.get("MetricName")), dims, stage))
		}
		for _, c := range n.Content {
			walk(alarm, (*yamlNode)(c))
		}
	}
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type").Value == "AWS::CloudWatch::Alarm" {
			walk(r[0].Value, r[1].get("Properties"))
		}
	}
	require.NotEmpty(t, refs, "no alarm found in template.yaml")
	return refs
}

// logFilterMetrics are the metrics of our namespace the template itself
// publishes from log metric filters (not EMF): name and dimension names.
func logFilterMetrics(t *testing.T, tpl samTemplate) map[metricRef]bool {
	t.Helper()
	out := map[metricRef]bool{}
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type").Value != "AWS::Logs::MetricFilter" {
			continue
		}
		for _, tr := range r[1].get("Properties", "MetricTransformations").Content {
			tr := (*yamlNode)(tr)
			require.Equal(t, metricsNamespace, tr.get("MetricNamespace").Value, "metric filter %s", r[0].Value)
			var dims []string
			if d := tr.get("Dimensions"); d != nil {
				for _, dim := range d.Content {
					dims = append(dims, subStage(t, (*yamlNode)(dim).get("Key")))
				}
			}
			ref := refOf("", "", subStage(t, tr.get("MetricName")), dims, "")
			out[metricRef{name: ref.name, dims: ref.dims}] = true
		}
	}
	return out
}

// The parts of a dashboard SEARCH('<search>', stat, period): its schema
// ({namespace,dim,...}, the exact dimension set), the MetricName term and
// the Stage filter, in any order, quoted or not.
var (
	searchArg    = regexp.MustCompile(`SEARCH\(\s*'([^']*)'`)
	searchSchema = regexp.MustCompile(`\{([^}]*)\}`)
	searchName   = regexp.MustCompile(`MetricName\s*=\s*"?([^"\s)]+)"?`)
	searchStage  = regexp.MustCompile(`\bStage\s*=\s*"?([^"\s)]+)"?`)
)

// dashboardMetrics are the metrics the dashboard's widgets read:
// [namespace, name, dim, value, ..., {options}] rows and SEARCH
// expressions. Rows are spelt out: the "." and "..." shorthands (repeat the
// row above) are refused rather than guessed at.
func dashboardMetrics(t *testing.T, tpl samTemplate) []metricRef {
	t.Helper()
	body := tpl.resource(t, "Dashboard").get("Properties", "DashboardBody")
	require.Equal(t, "!Sub", body.Tag)
	text := strings.ReplaceAll(body.Value, "${Stage}", templateStage)
	text = regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(text, "x")
	var doc struct {
		Widgets []struct {
			Properties struct {
				Title   string
				Metrics [][]any
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(text), &doc), "the dashboard body is not JSON once substituted")
	var refs []metricRef
	for _, w := range doc.Widgets {
		where := "dashboard widget " + w.Properties.Title
		for _, row := range w.Properties.Metrics {
			require.NotEmpty(t, row, "%s: empty metrics row", where)
			if opts, ok := row[0].(map[string]any); ok {
				expr, _ := opts["expression"].(string)
				if !strings.Contains(expr, "SEARCH(") {
					continue // math over other rows, not a metric of its own
				}
				arg := searchArg.FindStringSubmatch(expr)
				require.NotNil(t, arg, "%s: cannot read the search of %q", where, expr)
				schema := searchSchema.FindStringSubmatch(arg[1])
				name := searchName.FindStringSubmatch(arg[1])
				require.True(t, schema != nil && name != nil, "%s: a search without a {namespace,...} schema or a MetricName: %q", where, expr)
				var parts []string
				for _, p := range strings.Split(schema[1], ",") {
					parts = append(parts, strings.Trim(strings.TrimSpace(p), `"`))
				}
				var stage string
				if m := searchStage.FindStringSubmatch(searchSchema.ReplaceAllString(arg[1], "")); m != nil {
					stage = m[1]
				}
				refs = append(refs, refOf(where, parts[0], name[1], parts[1:], stage))
				continue
			}
			for _, v := range row {
				require.False(t, v == "." || v == "...", "%s: rows are spelt out, not abbreviated: %v", where, row)
			}
			require.GreaterOrEqual(t, len(row), 2, "%s: row %v", where, row)
			ns, _ := row[0].(string)
			name, _ := row[1].(string)
			var dims []string
			var stage string
			for i := 2; i+1 < len(row); i += 2 {
				k, ok := row[i].(string)
				if !ok {
					break // the options object
				}
				dims = append(dims, k)
				if k == "Stage" {
					stage, _ = row[i+1].(string)
				}
			}
			refs = append(refs, refOf(where, ns, name, dims, stage))
		}
	}
	require.NotEmpty(t, refs, "no metric found on the dashboard")
	return refs
}
