package app

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTemplateOverloadAlarmCountsThrottledRequestsOnly: the api-4xx alarm
// means "callers exceed the route throttling" (docs/runbook.md). API
// Gateway's 4xx metric counts every client-side error ("The number of
// client-side errors captured in a given period", HTTP API metrics), and in
// normal MCP traffic most of those are not overload: every client's first
// request has no token and gets the function's 401 (the discovery
// challenge), a GET /mcp gets 405, an expired token 401. So the alarm reads
// the access log's 429s alone, counted by a metric filter.
func TestTemplateOverloadAlarmCountsThrottledRequestsOnly(t *testing.T) {
	tpl := loadTemplate(t)
	alarm := tpl.resource(t, "ApiThrottleAlarm").get("Properties")
	ns := alarm.get("Namespace")
	require.NotNil(t, ns, "ApiThrottleAlarm reads one metric")
	assert.NotEqual(t, "AWS/ApiGateway", ns.Value,
		"AWS/ApiGateway 4xx counts every MCP client's 401 discovery challenge and GET 405s, not only route throttling")
	name := subStage(t, alarm.get("MetricName"))

	var statuses []string
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type").Value != "AWS::Logs::MetricFilter" {
			continue
		}
		props := r[1].get("Properties")
		for _, tr := range props.get("MetricTransformations").Content {
			if subStage(t, (*yamlNode)(tr).get("MetricName")) != name {
				continue
			}
			name, arg := intrinsic(props.get("LogGroupName"))
			assert.Equal(t, []string{"Ref", "ApiAccessLogGroup"}, []string{name, arg.Value}, "counted from the API access log")
			for _, m := range regexp.MustCompile(`\$\.status\s*=\s*"?(\d+)"?`).FindAllStringSubmatch(props.get("FilterPattern").Value, -1) {
				statuses = append(statuses, m[1])
			}
		}
	}
	assert.Equal(t, []string{"429"}, statuses, "ApiThrottleAlarm's metric must come from a metric filter on status 429 alone")
}
