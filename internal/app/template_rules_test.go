package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/intentgate/intentgate/internal/auth"
)

// parameterAccepts reports whether CloudFormation would accept v for the
// parameter (AllowedPattern, AllowedValues).
func (tpl samTemplate) parameterAccepts(t *testing.T, name, v string) bool {
	t.Helper()
	p := tpl.root.get("Parameters", name)
	require.NotNil(t, p, "no parameter %s", name)
	if pattern := p.get("AllowedPattern"); pattern != nil && !regexp.MustCompile(pattern.Value).MatchString(v) {
		return false
	}
	if allowed := p.get("AllowedValues"); allowed != nil {
		for _, a := range allowed.Content {
			if a.Value == v {
				return true
			}
		}
		return false
	}
	return true
}

func TestTemplateURLParametersRequireHTTPS(t *testing.T) {
	tpl := loadTemplate(t)
	for _, name := range []string{"ResourceUrl", "TokenIssuer", "JwksUrl", "RiskApiUrl", "ReleaseApiUrl"} {
		t.Run(name, func(t *testing.T) {
			assert.True(t, tpl.parameterAccepts(t, name, "https://api.example.com/v1"))
			assert.False(t, tpl.parameterAccepts(t, name, "http://api.example.com/v1"), "plain http to a real host")
			assert.False(t, tpl.parameterAccepts(t, name, "http://localhost.attacker.example/x"), "a loopback-looking host name")
			assert.False(t, tpl.parameterAccepts(t, name, "ftp://api.example.com"))
			assert.False(t, tpl.parameterAccepts(t, name, "https://"))
			// LocalStack: functions reach the host's simulators over http.
			assert.True(t, tpl.parameterAccepts(t, name, "http://host.docker.internal:8081"))
			assert.True(t, tpl.parameterAccepts(t, name, "http://localhost:4566/mcp"))
		})
	}
}

// A URL the template accepts is one the functions start with: a value
// that passes the parameter's pattern but fails FromEnv deploys green (a
// first create runs no start-up check) and never serves.
func TestTemplateURLParametersAcceptOnlyURLsTheFunctionsAccept(t *testing.T) {
	tpl := loadTemplate(t)
	samples := []string{
		"https://a b", "https://a/b c", "https://a/\tb", "https://a/%zz", "https://a/b%2", "https://a/%", "https://a%20b",
		"http://localhost/a b", "http://localhost/%zz",
		"https://a/b%20c", "https://a.example.com/v1?x=1", "https://a:8443/p#f", "http://localhost:4566/mcp",
	}
	for _, name := range []string{"ResourceUrl", "TokenIssuer", "JwksUrl", "RiskApiUrl", "ReleaseApiUrl"} {
		for _, v := range samples {
			if tpl.parameterAccepts(t, name, v) {
				assert.NoError(t, absoluteURL(v), "%s accepts %q, which the functions refuse", name, v)
			}
		}
		assert.True(t, tpl.parameterAccepts(t, name, "https://a/b%20c"), "%s: an escaped space is a URL", name)
	}
}

func TestTemplateKMSKeyMustBeAFullKeyARN(t *testing.T) {
	tpl := loadTemplate(t)
	for v, want := range map[string]bool{
		"": true,
		"arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab":            true,
		"arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab":            true,
		"arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab": true,
		"1234abcd-12ab-34cd-56ef-1234567890ab":                                                   false, // a key id breaks the IAM policy
		"arn:aws:kms:eu-west-1:123456789012:alias/intentgate":                                    false, // an alias ARN never matches kms:Decrypt
		"alias/intentgate": false,
		"arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef": false,
	} {
		assert.Equal(t, want, tpl.parameterAccepts(t, "DownstreamApiKeyKmsKeyArn", v), "%q", v)
	}
}

// TestTemplateRequestBudgetFitsEveryFunctionTimeout: each function is told
// its own timeout, and the largest DownstreamTimeout the template accepts
// still starts; the start-up check refuses one that could not fit.
func TestTemplateRequestBudgetFitsEveryFunctionTimeout(t *testing.T) {
	tpl := loadTemplate(t)
	assert.True(t, tpl.parameterAccepts(t, "DownstreamTimeout", "20s"))
	assert.True(t, tpl.parameterAccepts(t, "DownstreamTimeout", "750ms"))
	for _, tooLong := range []string{"21s", "29s", "60s", "10000ms", "0s", "1m", "5"} {
		assert.False(t, tpl.parameterAccepts(t, "DownstreamTimeout", tooLong), tooLong)
	}
	values := maps.Clone(templateSamples)
	values["DownstreamTimeout"] = "20s"
	ev := tpl.evaluator(t, values)
	for _, fn := range tpl.functions(t) {
		r := tpl.resource(t, fn.id)
		timeout := r.get("Properties", "Timeout")
		require.NotNil(t, timeout, "%s has no Timeout", fn.id)
		v, _, err := ev.eval(fn.env["INTENTGATE_INVOCATION_TIMEOUT"])
		require.NoError(t, err)
		assert.Equal(t, timeout.Value+"s", v, "%s: INTENTGATE_INVOCATION_TIMEOUT must be its Timeout", fn.id)

		env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": fn.id}
		for name, node := range fn.env {
			if v, ok, err := ev.eval(node); err == nil && ok {
				env[name] = v.(string)
			}
		}
		_, err = FromEnv(mapLookup(env))
		assert.NoError(t, err, "%s with the largest DownstreamTimeout", fn.id)
		env["INTENTGATE_DOWNSTREAM_TIMEOUT"] = timeout.Value + "s"
		_, err = FromEnv(mapLookup(env))
		assert.ErrorContains(t, err, "INTENTGATE_INVOCATION_TIMEOUT", "%s: a budget longer than the function timeout", fn.id)
	}
}

func TestTemplateZeroReservedConcurrencyMeansNoReservation(t *testing.T) {
	tpl := loadTemplate(t)
	for fn, param := range map[string]string{"McpFunction": "McpReservedConcurrency", "ReconcilerFunction": "ReconcilerReservedConcurrency"} {
		node := tpl.resource(t, fn).get("Properties", "ReservedConcurrentExecutions")
		values := maps.Clone(templateSamples)
		values[param] = "0"
		_, present, err := tpl.evaluator(t, values).eval(node)
		require.NoError(t, err)
		assert.False(t, present, "%s=0 must drop the reservation", param)
		values[param] = "7"
		v, present, err := tpl.evaluator(t, values).eval(node)
		require.NoError(t, err)
		assert.True(t, present)
		assert.Equal(t, "7", v)
	}
}

func TestTemplateFirstCreateOfTheTableCanBeRetried(t *testing.T) {
	table := loadTemplate(t).resource(t, "OperationsTable")
	assert.Equal(t, "RetainExceptOnCreate", table.get("DeletionPolicy").Value)
	assert.Equal(t, "Retain", table.get("UpdateReplacePolicy").Value)
}

func TestTemplateAccessLogsUseTheVendedLogsPrefix(t *testing.T) {
	tpl := loadTemplate(t)
	v, _, err := tpl.evaluator(t, templateSamples).eval(tpl.resource(t, "ApiAccessLogGroup").get("Properties", "LogGroupName"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(v.(string), "/aws/vendedlogs/"), v)
}

func TestTemplateSweepIsNeitherRetriedNorQueued(t *testing.T) {
	fn := loadTemplate(t).resource(t, "ReconcilerFunction").get("Properties")
	assert.Equal(t, "0", fn.get("EventInvokeConfig", "MaximumRetryAttempts").Value)
	age := fn.get("EventInvokeConfig", "MaximumEventAgeInSeconds")
	require.NotNil(t, age)
	assert.LessOrEqual(t, len(age.Value), 3, "a short maximum event age, got %s s", age.Value)
	assert.Equal(t, "0", fn.get("Events", "Sweep", "Properties", "RetryPolicy", "MaximumRetryAttempts").Value)
}

// TestTemplateReconcilerStreamReportsBatchItemFailures: the reconciler
// answers stream batches with batchItemFailures, which Lambda reads only
// when the mapping lists ReportBatchItemFailures; without it a failed record
// would be checkpointed as delivered.
func TestTemplateReconcilerStreamReportsBatchItemFailures(t *testing.T) {
	events := loadTemplate(t).resource(t, "ReconcilerFunction").get("Properties", "Events").entries()
	var streams int
	for _, ev := range events {
		if ev[1].get("Type").Value != "DynamoDB" {
			continue
		}
		streams++
		types := ev[1].get("Properties", "FunctionResponseTypes")
		require.NotNil(t, types, "%s has no FunctionResponseTypes", ev[0].Value)
		require.Equal(t, yaml.SequenceNode, types.Kind, "%s.FunctionResponseTypes is a literal list", ev[0].Value)
		var listed []string
		for _, v := range types.Content {
			listed = append(listed, v.Value)
		}
		assert.Contains(t, listed, "ReportBatchItemFailures", ev[0].Value)
	}
	assert.Equal(t, 1, streams, "the reconciler has one stream trigger")
}

func TestTemplateGatewayModeRequiresAScope(t *testing.T) {
	tpl := loadTemplate(t)
	values := maps.Clone(templateSamples)
	maps.Copy(values, map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp"})
	ev := tpl.evaluator(t, values)
	var refused bool
	for _, r := range tpl.root.get("Rules").entries() {
		applies, err := ev.truth(r[1].get("RuleCondition"))
		require.NoError(t, err)
		for _, a := range r[1].get("Assertions").Content {
			ok, err := ev.truth((*yamlNode)(a).get("Assert"))
			require.NoError(t, err)
			refused = refused || (applies && !ok)
		}
	}
	assert.True(t, refused, "GatewayJwtAuthorizer=true without GatewayRequiredScope must be refused")
}

// TestTemplateDeploysThroughACanaryRolledBackByAlarms: every function
// publishes to an alias under a DeploymentPreference whose alarms exist,
// and each of them judges what the new version does: Lambda errors of the
// version the alias runs, events counted per period rather than a state
// that outlives the version (a queue's depth stays up until someone empties
// it and would stop every deploy meanwhile), and nothing that names the
// HTTP API (the API integrates the alias, whose update waits for the
// deployment group, which waits for its alarms: a cycle CloudFormation
// refuses).
func TestTemplateDeploysThroughACanaryRolledBackByAlarms(t *testing.T) {
	tpl := loadTemplate(t)
	assert.Equal(t, "live", tpl.root.get("Globals", "Function", "AutoPublishAlias").Value)
	assert.Equal(t, "JSON", tpl.root.get("Globals", "Function", "LoggingConfig", "LogFormat").Value)
	for _, mode := range []string{"false", "true"} {
		values := maps.Clone(templateSamples)
		if mode == "true" {
			maps.Copy(values, map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "s"})
		}
		ev := tpl.evaluator(t, values)
		for _, fn := range tpl.functions(t) {
			pref := tpl.resource(t, fn.id).get("Properties", "DeploymentPreference")
			require.NotNil(t, pref, "%s has no DeploymentPreference", fn.id)
			alarms, _, err := ev.eval(pref.get("Alarms"))
			require.NoError(t, err)
			require.NotEmpty(t, alarms, fn.id)
			for _, a := range alarms.([]any) {
				id := strings.TrimPrefix(strings.TrimSuffix(a.(string), "-PLACEHOLDER"), "intentgate-test-")
				alarm := tpl.resource(t, id)
				assert.Equal(t, "AWS::CloudWatch::Alarm", alarm.get("Type").Value)
				names := referencedResources(alarm)
				if d := alarm.get("DependsOn"); d != nil {
					names = append(names, d.Value)
					for _, c := range d.Content {
						names = append(names, c.Value)
					}
				}
				assert.NotContains(t, names, "HttpApi", "%s: rollback alarm %s names the API", fn.id, id)
				for _, m := range metricsOfAlarm(alarm) {
					if m.get("MetricName") != nil {
						assert.False(t, strings.HasPrefix(m.get("MetricName").Value, "Approximate"),
							"%s: rollback alarm %s watches a state (%s), not events", fn.id, id, m.get("MetricName").Value)
					}
					if m.get("Namespace") == nil || m.get("Namespace").Value != "AWS/Lambda" {
						continue
					}
					dims := map[string]*yamlNode{}
					for _, d := range m.get("Dimensions").Content {
						dims[(*yamlNode)(d).get("Name").Value] = (*yamlNode)(d).get("Value")
					}
					owner := ""
					if f := dims["FunctionName"]; f != nil {
						if name, arg := intrinsic(f); name == "Ref" {
							owner = arg.Value
						}
					}
					require.NotEmpty(t, owner, "%s: rollback alarm %s: a Lambda metric of which function?", fn.id, id)
					if r := dims["Resource"]; assert.NotNil(t, r, "%s: rollback alarm %s must count the alias's invocations", fn.id, id) {
						name, arg := intrinsic(r)
						assert.Equal(t, []string{"Fn::Sub", "${" + owner + "}:live"}, []string{name, arg.Value}, "%s: rollback alarm %s: Resource", fn.id, id)
					}
					if v := dims["ExecutedVersion"]; assert.NotNil(t, v, "%s: rollback alarm %s must count the version the alias runs", fn.id, id) {
						name, arg := intrinsic(v)
						assert.Equal(t, []string{"Fn::GetAtt", owner + ".Version.Version"}, []string{name, arg.Value},
							"%s: rollback alarm %s: ExecutedVersion must be the version this deploy published", fn.id, id)
					}
				}
				if c := alarm.get("Condition"); c != nil {
					on, err := ev.condition(c.Value)
					require.NoError(t, err)
					assert.True(t, on, "%s: rollback alarm %s does not exist with GatewayJwtAuthorizer=%s", fn.id, id, mode)
				}
			}
		}
	}
}

// TestTemplateLetsADeployThatFixesWhatSetsOffTheSharedAlarmsBeRolledBackOnlyByItsOwnErrors:
// escalations, the auth alarm and stream failures are counted for the whole
// stack, whichever version caused them. While the version being replaced
// sets them off, every deploy of its fix would be rolled back to it. With
// RollbackAlarms=NewVersionErrors (make deploy ARGS=-fix-forward) the only
// rollback trigger of each function is the Lambda errors of the version
// this deploy published; the default keeps every alarm.
func TestTemplateLetsADeployThatFixesWhatSetsOffTheSharedAlarmsBeRolledBackOnlyByItsOwnErrors(t *testing.T) {
	tpl := loadTemplate(t)
	p := tpl.root.get("Parameters", "RollbackAlarms")
	require.NotNil(t, p, "template.yaml has no RollbackAlarms parameter")
	assert.Equal(t, "All", p.get("Default").Value)
	for _, mode := range []string{"false", "true"} {
		values := maps.Clone(templateSamples)
		if mode == "true" {
			maps.Copy(values, map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "s"})
		}
		every := tpl.evaluator(t, values)
		values["RollbackAlarms"] = "NewVersionErrors"
		own := tpl.evaluator(t, values)
		for _, fn := range tpl.functions(t) {
			pref := tpl.resource(t, fn.id).get("Properties", "DeploymentPreference")
			all, _, err := every.eval(pref.get("Alarms"))
			require.NoError(t, err)
			fixForward, _, err := own.eval(pref.get("Alarms"))
			require.NoError(t, err)
			require.Len(t, fixForward, 1, "%s, GatewayJwtAuthorizer=%s: one rollback trigger when fixing forward", fn.id, mode)
			assert.Subset(t, all, fixForward, fn.id)
			assert.Greater(t, len(all.([]any)), 1, "%s: the default keeps the shared alarms", fn.id)

			id := strings.TrimPrefix(strings.TrimSuffix(fixForward.([]any)[0].(string), "-PLACEHOLDER"), "intentgate-test-")
			metrics := metricsOfAlarm(tpl.resource(t, id))
			require.NotEmpty(t, metrics, id)
			for _, m := range metrics {
				assert.Equal(t, "AWS/Lambda", m.get("Namespace").Value, "%s: %s", fn.id, id)
				assert.Equal(t, "Errors", m.get("MetricName").Value, "%s: %s", fn.id, id)
				executed := false
				for _, d := range m.get("Dimensions").Content {
					if (*yamlNode)(d).get("Name").Value != "ExecutedVersion" {
						continue
					}
					name, arg := intrinsic((*yamlNode)(d).get("Value"))
					executed = name == "Fn::GetAtt" && arg.Value == fn.id+".Version.Version"
				}
				assert.True(t, executed, "%s: %s must count only the errors of the version this deploy published", fn.id, id)
			}
		}
	}
}

// TestTemplateRolesGrantOnlyWhatTheStoreCalls compares the DynamoDB actions
// of both roles with the calls internal/store makes: nothing the code does
// not call (no Query on the table, no ConditionCheckItem, no Scan), DeleteItem
// only on business-key items, and every call covered.
func TestTemplateRolesGrantOnlyWhatTheStoreCalls(t *testing.T) {
	tpl := loadTemplate(t)
	used := storeDynamoDBActions(t)
	granted := map[string]bool{}
	for _, role := range []string{"McpFunctionRole", "ReconcilerFunctionRole"} {
		for _, st := range tableStatements(t, tpl, role) {
			for _, action := range st.actions {
				granted[action] = true
				switch action {
				case "dynamodb:Query":
					assert.True(t, strings.HasSuffix(st.resource, "/index/due"), "%s: Query only on the due index, got %s", role, st.resource)
					assert.Equal(t, "ReconcilerFunctionRole", role, "the MCP function never queries")
				case "dynamodb:DeleteItem":
					assert.Equal(t, `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["bk#*"]}}`, st.condition, "%s: DeleteItem only on business-key items", role)
				case "dynamodb:ConditionCheckItem", "dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem":
					assert.Contains(t, used, action, "%s grants %s, which internal/store never calls", role, action)
				}
			}
		}
	}
	for _, action := range used {
		assert.True(t, granted[action], "internal/store calls %s, which no role grants", action)
	}
}

type iamStatement struct {
	actions             []string
	resource, condition string
}

func tableStatements(t *testing.T, tpl samTemplate, role string) []iamStatement {
	t.Helper()
	ev := tpl.evaluator(t, templateSamples)
	var out []iamStatement
	for _, pol := range tpl.resource(t, role).get("Properties", "Policies").Content {
		doc, _, err := ev.eval((*yamlNode)(pol).get("PolicyDocument"))
		require.NoError(t, err)
		for _, raw := range doc.(map[string]any)["Statement"].([]any) {
			st := raw.(map[string]any)
			var actions []string
			switch a := st["Action"].(type) {
			case string:
				actions = []string{a}
			case []any:
				for _, x := range a {
					actions = append(actions, x.(string))
				}
			}
			resource, _ := st["Resource"].(string)
			if !slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, "dynamodb:") }) ||
				!strings.Contains(resource, "OperationsTable/Arn") {
				continue
			}
			cond := ""
			if c, ok := st["Condition"]; ok {
				cond = compactJSON(t, c)
			}
			out = append(out, iamStatement{actions: actions, resource: resource, condition: cond})
		}
	}
	require.NotEmpty(t, out, "%s has no statement on the operations table", role)
	return out
}

// storeDynamoDBActions reads the IAM actions internal/store's calls need:
// direct client calls, and the item kinds inside transactions.
func storeDynamoDBActions(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../store/*.go")
	require.NoError(t, err)
	direct := regexp.MustCompile(`s\.db\.([A-Za-z]+)\(`)
	inTx := regexp.MustCompile(`types\.(Put|Update|Delete|ConditionCheck)\{`)
	txAction := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
	setup := map[string]bool{"CreateTable": true, "DescribeTable": true, "DeleteTable": true, "DescribeTimeToLive": true, "UpdateTimeToLive": true}
	var out []string
	add := func(a string) {
		if !slices.Contains(out, "dynamodb:"+a) {
			out = append(out, "dynamodb:"+a)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "schema.go") {
			continue // schema.go: local table setup, never run by the functions
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range direct.FindAllStringSubmatch(string(src), -1) {
			switch {
			case setup[m[1]]:
			case m[1] == "TransactWriteItems", m[1] == "TransactGetItems":
			default:
				add(m[1])
			}
		}
		for _, m := range inTx.FindAllStringSubmatch(string(src), -1) {
			add(txAction[m[1]])
		}
	}
	require.Contains(t, out, "dynamodb:GetItem", "the scan of internal/store found nothing: has the client field been renamed?")
	return out
}

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// referencedResources are the names a node refers to by Ref, GetAtt or
// ${...} in Sub, anywhere below it.
func referencedResources(n *yamlNode) []string {
	var out []string
	var walk func(n *yamlNode)
	walk = func(n *yamlNode) {
		if n == nil {
			return
		}
		switch name, arg := intrinsic(n); name {
		case "Ref":
			out = append(out, arg.Value)
		case "Fn::GetAtt":
			if arg.Kind == yaml.ScalarNode {
				out = append(out, strings.SplitN(arg.Value, ".", 2)[0])
			} else if len(arg.Content) > 0 {
				out = append(out, arg.Content[0].Value)
			}
		case "Fn::Sub":
			src := arg.Value
			if arg.Kind == yaml.SequenceNode && len(arg.Content) > 0 {
				src = arg.Content[0].Value
			}
			for _, m := range subReference.FindAllStringSubmatch(src, -1) {
				out = append(out, strings.SplitN(m[1], ".", 2)[0])
			}
		}
		for _, c := range n.Content {
			walk((*yamlNode)(c))
		}
	}
	walk(n)
	return out
}

var subReference = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// metricsOfAlarm are the metric nodes one alarm reads, wherever they sit:
// its own Namespace/MetricName/Dimensions, or a MetricStat of its metric
// math.
func metricsOfAlarm(alarm *yamlNode) []*yamlNode {
	var out []*yamlNode
	var walk func(n *yamlNode)
	walk = func(n *yamlNode) {
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode && n.get("MetricName") != nil {
			out = append(out, n)
		}
		for _, c := range n.Content {
			walk((*yamlNode)(c))
		}
	}
	walk(alarm.get("Properties"))
	return out
}

// A canary decides nothing when the new version gets no traffic in its
// window (10% of a sweep a minute is half an invocation in five minutes):
// every function deployed through one is first checked by a PreTraffic hook
// (functions/deployhook) that invokes exactly the version being deployed,
// with that function's probe, and CodeDeploy's role may invoke the hook.
func TestTemplateEveryCanaryIsCheckedBeforeTrafficShifts(t *testing.T) {
	tpl := loadTemplate(t)
	probes := map[string]string{"McpFunction": "mcp", "ReconcilerFunction": "reconciler"}
	invokable := func(roleRef *yamlNode) []string {
		t.Helper()
		require.NotNil(t, roleRef)
		require.Equal(t, "!GetAtt", roleRef.Tag)
		role := tpl.resource(t, strings.TrimSuffix(roleRef.Value, ".Arn"))
		var arns []string
		for _, p := range role.get("Properties", "Policies").Content {
			for _, st := range (*yamlNode)(p).get("PolicyDocument", "Statement").Content {
				s := (*yamlNode)(st)
				if s.get("Action") == nil || s.get("Action").Value != "lambda:InvokeFunction" {
					continue
				}
				for _, r := range s.get("Resource").Content {
					arns = append(arns, r.Value)
				}
			}
		}
		return arns
	}
	for _, fn := range tpl.functions(t) {
		fnProps := tpl.resource(t, fn.id).get("Properties")
		pref := fnProps.get("DeploymentPreference")
		hookRef := pref.get("Hooks", "PreTraffic")
		require.NotNil(t, hookRef, "%s: no PreTraffic hook", fn.id)
		require.Equal(t, "!Ref", hookRef.Tag)
		hook := tpl.resource(t, hookRef.Value).get("Properties")
		assert.Equal(t, deployHookCode, hook.get("CodeUri").Value, fn.id)
		target := hook.get("Environment", "Variables", "INTENTGATE_HOOK_TARGET")
		require.NotNil(t, target, fn.id)
		assert.Equal(t, "!Ref", target.Tag)
		assert.Equal(t, fn.id+".Version", target.Value, "%s: the version being deployed, not $LATEST or the alias", fn.id)
		assert.Equal(t, probes[fn.id], hook.get("Environment", "Variables", "INTENTGATE_HOOK_PROBE").Value, fn.id)
		fnTimeout, err := strconv.Atoi(fnProps.get("Timeout").Value)
		require.NoError(t, err)
		hookTimeout, err := strconv.Atoi(hook.get("Timeout").Value)
		require.NoError(t, err)
		assert.Greater(t, hookTimeout, fnTimeout, "%s: the hook waits out the function's own timeout", fn.id)

		hookName := hook.get("FunctionName").Value
		assert.True(t, slices.ContainsFunc(invokable(pref.get("Role")), func(arn string) bool { return strings.HasSuffix(arn, ":function:"+hookName) }),
			"%s: CodeDeploy's role may not invoke its hook %s", fn.id, hookName)
		fnName := fnProps.get("FunctionName").Value
		assert.True(t, slices.ContainsFunc(invokable(hook.get("Role")), func(arn string) bool { return strings.HasSuffix(arn, ":function:"+fnName+":*") }),
			"%s: its hook may not invoke the function's versions", fn.id)
	}
}

// TestTemplateClockSkewBoundIsOneTheFunctionsAccept: a bound the template
// accepts but the functions refuse (above MaxClockSkewBound) deploys
// functions that fail at every start; a first create runs no PreTraffic
// check, so nothing would stop it.
func TestTemplateClockSkewBoundIsOneTheFunctionsAccept(t *testing.T) {
	tpl := loadTemplate(t)
	for _, v := range []string{"0s", "10s", "250ms", "5m", "300s", "300000ms", "0m"} {
		require.True(t, tpl.parameterAccepts(t, "ClockSkewBound", v), v)
		values := maps.Clone(templateSamples)
		values["ClockSkewBound"] = v
		ev := tpl.evaluator(t, values)
		for _, fn := range tpl.functions(t) {
			env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": fn.id}
			for name, node := range fn.env {
				if s, ok, err := ev.eval(node); err == nil && ok {
					env[name] = s.(string)
				}
			}
			_, err := FromEnv(mapLookup(env))
			assert.NoError(t, err, "%s with ClockSkewBound=%s", fn.id, v)
		}
	}
	for _, v := range []string{"6m", "10m", "301s", "300001ms", "1h", "5", "-1s", "99999999999999999999s"} {
		assert.False(t, tpl.parameterAccepts(t, "ClockSkewBound", v), "%s is above the functions' %s", v, MaxClockSkewBound)
	}
}

// servesResource runs what the MCP function does with INTENTGATE_RESOURCE_URL
// when it starts (app.go): the config check, the metadata URL its 401s
// name, and a route per metadata path, whose pattern http.ServeMux parses
// (and panics on).
func servesResource(resource string) (err error) {
	if err := absoluteURL(resource); err != nil {
		return err
	}
	if _, err := auth.ResourceMetadataURL(resource); err != nil {
		return err
	}
	paths, err := auth.ProtectedResourceMetadataPaths(resource)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route: %v", p)
		}
	}()
	mux := http.NewServeMux()
	for _, p := range paths {
		mux.Handle("GET "+p, http.NotFoundHandler())
	}
	return nil
}

// ResourceUrl goes further than the other URLs: the MCP function derives
// its protected resource metadata's URL and routes from it, which refuse
// a fragment (RFC 9728's resource has none) and a path ServeMux cannot
// take as a pattern. A value the template accepts must pass them, or a
// first create deploys green and never serves.
func TestTemplateResourceUrlAcceptsOnlyAResourceTheMcpFunctionServes(t *testing.T) {
	tpl := loadTemplate(t)
	for _, v := range []string{
		"https://mcp.example.com/mcp#f", "https://mcp.example.com/#", "https://mcp.example.com/m{cp", "https://mcp.example.com/m}cp",
		"http://localhost:4566/mcp#f",
	} {
		if tpl.parameterAccepts(t, "ResourceUrl", v) {
			assert.NoError(t, servesResource(v), "ResourceUrl accepts %q, which the MCP function refuses at start", v)
		}
	}
	for _, v := range []string{"https://mcp.example.com/mcp", "https://abc123.execute-api.eu-west-1.amazonaws.com/mcp",
		"https://mcp.example.com/a%20b/mcp", "http://localhost:4566/mcp", "https://mcp.example.com"} {
		assert.True(t, tpl.parameterAccepts(t, "ResourceUrl", v), v)
		assert.NoError(t, servesResource(v), v)
	}
}
