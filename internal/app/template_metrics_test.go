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
// names: an alarm or a widget that asks for a set the functions never
// publish stays empty (an alarm on it never fires), and nothing reports it.

// metricRef is one metric as the template asks for it: name and dimension
// names, sorted and joined.
type metricRef struct{ name, dims string }

func refOf(name string, dims []string) metricRef {
	slices.Sort(dims)
	return metricRef{name: name, dims: strings.Join(dims, ",")}
}

const templateStage = "test"

func TestEveryAlarmAndDashboardMetricIsOneTheFunctionsPublish(t *testing.T) {
	published := publishedMetrics(t)
	tpl := loadTemplate(t)
	fromLogs := logFilterMetrics(t, tpl)

	alarms := alarmMetrics(t, tpl)
	require.NotEmpty(t, alarms, "no alarm on the %s namespace found in template.yaml", metricsNamespace)
	dashboard := dashboardMetrics(t, tpl)
	require.NotEmpty(t, dashboard, "no %s metric found on the dashboard", metricsNamespace)

	for where, refs := range map[string][]metricRef{"alarm": alarms, "dashboard": dashboard} {
		for _, ref := range refs {
			if fromLogs[ref] {
				continue
			}
			assert.Contains(t, published[ref.name], ref.dims,
				"%s reads %s with dimensions [%s]; the functions publish it under %q", where, ref.name, ref.dims, published[ref.name])
		}
	}
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
					ref := refOf(m.Name, slices.Clone(set))
					if !slices.Contains(published[m.Name], ref.dims) {
						published[m.Name] = append(published[m.Name], ref.dims)
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

// alarmMetrics are the metrics of our namespace every alarm reads, plain
// (Namespace/MetricName/Dimensions) or inside metric math (MetricStat).
func alarmMetrics(t *testing.T, tpl samTemplate) []metricRef {
	t.Helper()
	var refs []metricRef
	var walk func(n *yamlNode)
	walk = func(n *yamlNode) {
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode {
			if ns := n.get("Namespace"); ns != nil && ns.Value == metricsNamespace && n.get("MetricName") != nil {
				var dims []string
				if d := n.get("Dimensions"); d != nil {
					for _, dim := range d.Content {
						dims = append(dims, subStage(t, (*yamlNode)(dim).get("Name")))
					}
				}
				refs = append(refs, refOf(subStage(t, n.get("MetricName")), dims))
			}
		}
		for _, c := range n.Content {
			walk((*yamlNode)(c))
		}
	}
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type").Value == "AWS::CloudWatch::Alarm" {
			walk(r[1].get("Properties"))
		}
	}
	return refs
}

// logFilterMetrics are the metrics the template itself publishes from log
// metric filters (not EMF).
func logFilterMetrics(t *testing.T, tpl samTemplate) map[metricRef]bool {
	t.Helper()
	out := map[metricRef]bool{}
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type").Value != "AWS::Logs::MetricFilter" {
			continue
		}
		for _, tr := range r[1].get("Properties", "MetricTransformations").Content {
			tr := (*yamlNode)(tr)
			if tr.get("MetricNamespace").Value != metricsNamespace {
				continue
			}
			var dims []string
			if d := tr.get("Dimensions"); d != nil {
				for _, dim := range d.Content {
					dims = append(dims, subStage(t, (*yamlNode)(dim).get("Key")))
				}
			}
			out[refOf(subStage(t, tr.get("MetricName")), dims)] = true
		}
	}
	return out
}

// searchExpr is a dashboard SEARCH: '{namespace,dim,...} MetricName="name"'.
var searchExpr = regexp.MustCompile(`SEARCH\('\{([^}]*)\}\s+MetricName="([^"]+)"`)

// dashboardMetrics are the metrics of our namespace the dashboard's widgets
// read: [namespace, name, dim, value, ..., {options}] rows and SEARCH
// expressions (whose schema is the exact dimension set).
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
		for _, row := range w.Properties.Metrics {
			require.NotEmpty(t, row, "widget %q: empty metrics row", w.Properties.Title)
			if opts, ok := row[0].(map[string]any); ok {
				expr, _ := opts["expression"].(string)
				m := searchExpr.FindStringSubmatch(expr)
				if m == nil {
					continue // math over other rows, not a metric of its own
				}
				schema := strings.Split(m[1], ",")
				if strings.TrimSpace(schema[0]) != metricsNamespace {
					continue
				}
				var dims []string
				for _, d := range schema[1:] {
					dims = append(dims, strings.TrimSpace(d))
				}
				refs = append(refs, refOf(m[2], dims))
				continue
			}
			ns, _ := row[0].(string)
			require.NotEqual(t, "...", ns, "widget %q: rows are spelt out, not abbreviated", w.Properties.Title)
			if ns != metricsNamespace {
				continue
			}
			require.GreaterOrEqual(t, len(row), 2, "widget %q: row %v", w.Properties.Title, row)
			name, _ := row[1].(string)
			var dims []string
			for i := 2; i+1 < len(row); i += 2 {
				if k, ok := row[i].(string); ok {
					dims = append(dims, k)
				}
			}
			refs = append(refs, refOf(name, dims))
		}
	}
	return refs
}
