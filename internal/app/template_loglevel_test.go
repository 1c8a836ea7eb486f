package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
)

// lambdaLevelRank orders the application log levels of Lambda's log-level
// filter (docs: "Log-level filtering").
var lambdaLevelRank = map[string]int{"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4, "FATAL": 5}

// lambdaKeeps is Lambda's application log-level filter for a JSON line
// from a custom runtime: the line's "level" decides, and "if the level
// value field is invalid or missing, Lambda will assign the log output the
// level INFO"; lines under the function's ApplicationLogLevel are dropped
// before CloudWatch Logs (and so before EMF extraction) sees them.
func lambdaKeeps(t *testing.T, line []byte, applicationLogLevel string) bool {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(line, &doc), "%s", line)
	level, _ := doc["level"].(string)
	rank, ok := lambdaLevelRank[strings.ToUpper(level)]
	if !ok {
		rank = lambdaLevelRank["INFO"]
	}
	floor, ok := lambdaLevelRank[applicationLogLevel]
	require.True(t, ok, "ApplicationLogLevel %q", applicationLogLevel)
	return rank >= floor
}

// The LogLevel parameter promises that "audit records and EMF metrics are
// always written". Whatever LogLevel a deployer picks, Lambda's filter
// must let every audit record and every EMF document through (a dropped
// EMF document is a metric the alarms never see, and missing custom-metric
// data does not breach), while the functions' own log lines still follow
// LogLevel.
func TestAuditRecordsAndMetricsSurviveEveryAllowedLogLevel(t *testing.T) {
	tpl := loadTemplate(t)
	param := tpl.root.get("Parameters", "LogLevel", "AllowedValues")
	require.NotNil(t, param)
	for _, allowed := range param.Content {
		logLevel := allowed.Value
		t.Run(logLevel, func(t *testing.T) {
			values := maps.Clone(templateSamples)
			values["LogLevel"] = logLevel
			ev := tpl.evaluator(t, values)
			v, present, err := ev.eval(tpl.root.get("Globals", "Function", "LoggingConfig", "ApplicationLogLevel"))
			require.NoError(t, err)
			require.True(t, present)
			filter, _ := v.(string)

			var audit, metrics bytes.Buffer
			obs.NewAuditor(&audit).Record(context.Background(), obs.AuditRecord{Kind: obs.KindTransition, Tool: "request_risk_review", ToState: "ESCALATED"})
			require.NoError(t, newMetrics(&metrics, time.Now, "prod", nil).Emit(context.Background(),
				obs.Metric{Name: obs.MetricEscalatedOperations, Value: 1, Unit: obs.UnitCount}))
			assert.True(t, lambdaKeeps(t, audit.Bytes(), filter), "Lambda drops audit records at LogLevel %s (ApplicationLogLevel %s)", logLevel, filter)
			assert.True(t, lambdaKeeps(t, metrics.Bytes(), filter), "Lambda drops EMF documents at LogLevel %s (ApplicationLogLevel %s)", logLevel, filter)

			// The functions' own logger still filters at LogLevel.
			for _, fn := range tpl.functions(t) {
				env := map[string]string{"AWS_LAMBDA_LOG_LEVEL": filter} // what Lambda sets from ApplicationLogLevel
				for name, node := range fn.env {
					v, present, err := ev.eval(node)
					require.NoError(t, err, "%s %s", fn.id, name)
					if s, ok := v.(string); present && ok {
						env[name] = s
					}
				}
				cfg, err := FromEnv(mapLookup(env))
				require.NoError(t, err, fn.id)
				want := map[string]slog.Level{"DEBUG": slog.LevelDebug, "INFO": slog.LevelInfo, "WARN": slog.LevelWarn, "ERROR": slog.LevelError}[logLevel]
				assert.Equal(t, want, cfg.LogLevel, "%s logs at LogLevel", fn.id)
			}
		})
	}
}
