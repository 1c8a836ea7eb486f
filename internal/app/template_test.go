package app

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// setByLambdaOrDefault are variables FromEnv reads that the template leaves
// out on purpose; docs/deploy.md ("Function environment") says why.
var setByLambdaOrDefault = []string{
	"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_LAMBDA_FUNCTION_NAME", // set by Lambda
	"INTENTGATE_DYNAMODB_ENDPOINT", "INTENTGATE_SSM_ENDPOINT", // empty = AWS
	"INTENTGATE_RETENTION", "INTENTGATE_TRACING", "INTENTGATE_LISTEN_ADDR",
	"INTENTGATE_RISK_API_KEY", "INTENTGATE_RELEASE_API_KEY", // raw keys never go into the template
	"INTENTGATE_TASK_ID_KEY", // a raw key too: the MCP function reads INTENTGATE_TASK_ID_KEY_PARAMETER
	"INTENTGATE_RISK_SETTLE_WINDOW", "INTENTGATE_RELEASE_SETTLE_WINDOW",
	"INTENTGATE_BUDGET_AUTH", "INTENTGATE_BUDGET_STORE", "INTENTGATE_BUDGET_DOWNSTREAM", "INTENTGATE_BUDGET_RESERVE",
	"INTENTGATE_MAX_QUEUE_WAIT",
	"AWS_LAMBDA_LOG_LEVEL",      // set by Lambda from LoggingConfig.ApplicationLogLevel
	"INTENTGATE_MAX_BODY_BYTES", // the 32 KiB default is the safe choice; no tool needs more
}

// TestTemplateEnvironmentMatchesFromEnv: every variable template.yaml sets
// is one FromEnv reads (or the Go runtime's GOMEMLIMIT), and every variable
// FromEnv reads is set by the template or listed as deliberately left out.
func TestTemplateEnvironmentMatchesFromEnv(t *testing.T) {
	tpl := loadTemplate(t)
	var inTemplate []string
	for _, fn := range tpl.functions(t) {
		for name := range fn.env {
			if !slices.Contains(inTemplate, name) {
				inTemplate = append(inTemplate, name)
			}
		}
	}
	require.NotEmpty(t, inTemplate)

	var read []string
	_, _ = FromEnv(func(k string) (string, bool) {
		if !slices.Contains(read, k) {
			read = append(read, k)
		}
		return minimalEnv()[k], k == "INTENTGATE_RISK_API_URL"
	})

	for _, name := range inTemplate {
		if name == "GOMEMLIMIT" {
			continue // read by the Go runtime
		}
		assert.Contains(t, read, name, "template.yaml sets %s but FromEnv never reads it", name)
	}
	for _, name := range read {
		if !slices.Contains(setByLambdaOrDefault, name) {
			assert.Contains(t, inTemplate, name, "FromEnv reads %s but template.yaml does not set it", name)
		}
	}
	assert.NotContains(t, inTemplate, "INTENTGATE_DOWNSTREAM_API_KEY_PARAMETER", "replaced by the per-provider parameters")
}

// templateSamples stand in for the template parameters that have no Default
// (the deployer must pass them); realistic values, as samconfig.toml has.
var templateSamples = map[string]string{
	"ResourceUrl":   "https://mcp.example.com/mcp",
	"TokenIssuer":   "https://auth.example.com/",
	"JwksUrl":       "https://auth.example.com/.well-known/jwks.json",
	"RiskApiUrl":    "https://risk-api.example.internal",
	"ReleaseApiUrl": "https://release-api.example.internal",
}

// TestTemplateFunctionsStartInBothAuthModes resolves each function's
// environment from template.yaml the way CloudFormation would (parameter
// defaults plus the required samples) and runs the functions' own start-up
// checks on it. cfn-lint and sam build can not see that a default deployment
// hands the server an empty issuer and so exits at cold start.
func TestTemplateFunctionsStartInBothAuthModes(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		gateway   bool
	}{
		{name: "default: the server verifies tokens"},
		{
			name:      "GatewayJwtAuthorizer=true: API Gateway verifies",
			overrides: map[string]string{"GatewayJwtAuthorizer": "true", "JwtAudience": "https://mcp.example.com/mcp", "GatewayRequiredScope": "intentgate/mcp"},
			gateway:   true,
		},
	}
	tpl := loadTemplate(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			values := maps.Clone(templateSamples)
			maps.Copy(values, tc.overrides)
			ev := tpl.evaluator(t, values)
			ev.requireRulesHold(t)

			var sawMCP bool
			for _, fn := range tpl.functions(t) {
				env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "intentgate-test-" + fn.id, "AWS_REGION": "us-east-1"}
				for name, node := range fn.env {
					v, present, err := ev.eval(node)
					require.NoError(t, err, "%s %s", fn.id, name)
					if !present {
						continue
					}
					s, ok := v.(string)
					require.True(t, ok, "%s %s resolves to %T, want a string", fn.id, name, v)
					env[name] = s
				}
				cfg, err := FromEnv(mapLookup(env))
				require.NoError(t, err, "%s would exit at cold start", fn.id)
				if fn.codeURI != "functions/mcp" {
					continue
				}
				sawMCP = true
				require.NoError(t, cfg.ValidateAuth(), "%s would exit at cold start", fn.id)
				assert.Equal(t, tc.gateway, cfg.TrustGatewayAuthorizer)
				assert.Equal(t, templateSamples["TokenIssuer"], cfg.JWTIssuer)
				assert.Equal(t, templateSamples["JwksUrl"], cfg.JWKSURL)
				assert.Equal(t, templateSamples["ResourceUrl"], cfg.JWTAudience)
			}
			require.True(t, sawMCP, "no function with CodeUri functions/mcp in template.yaml")

			// The authorizer exists exactly in gateway mode and trusts the
			// same issuer and audience as the server.
			body := tpl.resource(t, "HttpApi").get("Properties", "DefinitionBody")
			require.NotNil(t, body)
			schemes, present, err := ev.eval(body.get("components", "securitySchemes"))
			require.NoError(t, err)
			security, securityPresent, err := ev.eval(body.get("paths", "/mcp", "post", "security"))
			require.NoError(t, err)
			assert.Equal(t, tc.gateway, present, "securitySchemes")
			assert.Equal(t, tc.gateway, securityPresent, "POST /mcp security")
			if tc.gateway {
				assert.Equal(t, []any{map[string]any{"gatewayJwt": []any{"intentgate/mcp"}}}, security, "the routes require the scope")
				jwt := schemes.(map[string]any)["gatewayJwt"].(map[string]any)["x-amazon-apigateway-authorizer"].(map[string]any)["jwtConfiguration"]
				assert.Equal(t, map[string]any{"issuer": templateSamples["TokenIssuer"], "audience": []any{"https://mcp.example.com/mcp"}}, jwt)
			}
		})
	}
}

// samTemplate is template.yaml as a YAML tree; CloudFormation's short-form
// intrinsics (!Ref, !If, ...) stay as node tags.
type samTemplate struct{ root *yamlNode }

// yamlNode adds a path lookup to yaml.Node.
type yamlNode yaml.Node

// get walks mapping keys; nil when a key is missing.
func (n *yamlNode) get(keys ...string) *yamlNode {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yamlNode
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = (*yamlNode)(n.Content[i+1])
			}
		}
		n = next
	}
	return n
}

// entries are a mapping's key/value pairs in order.
func (n *yamlNode) entries() [][2]*yamlNode {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yamlNode, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yamlNode{(*yamlNode)(n.Content[i]), (*yamlNode)(n.Content[i+1])})
	}
	return out
}

func loadTemplate(t *testing.T) samTemplate {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Len(t, doc.Content, 1)
	return samTemplate{root: (*yamlNode)(doc.Content[0])}
}

func (tpl samTemplate) resource(t *testing.T, id string) *yamlNode {
	t.Helper()
	r := tpl.root.get("Resources", id)
	require.NotNil(t, r, "template.yaml has no resource %s", id)
	return r
}

// deployHookCode is the CodeUri of the CodeDeploy PreTraffic hooks.
const deployHookCode = "functions/deployhook"

// samFunction is one AWS::Serverless::Function with its unresolved
// environment (Globals merged in, the function's own entries win).
type samFunction struct {
	id, codeURI string
	env         map[string]*yamlNode
}

// functions are the functions that run this package (internal/app), not
// the CodeDeploy hooks (functions/deployhook), which read none of its
// configuration.
func (tpl samTemplate) functions(t *testing.T) []samFunction {
	t.Helper()
	var fns []samFunction
	for _, r := range tpl.root.get("Resources").entries() {
		if r[1].get("Type") == nil || r[1].get("Type").Value != "AWS::Serverless::Function" {
			continue
		}
		fn := samFunction{id: r[0].Value, env: map[string]*yamlNode{}}
		if c := r[1].get("Properties", "CodeUri"); c != nil {
			fn.codeURI = c.Value
		}
		if fn.codeURI == deployHookCode {
			continue
		}
		for _, vars := range []*yamlNode{
			tpl.root.get("Globals", "Function", "Environment", "Variables"),
			r[1].get("Properties", "Environment", "Variables"),
		} {
			for _, kv := range vars.entries() {
				fn.env[kv[0].Value] = kv[1]
			}
		}
		fns = append(fns, fn)
	}
	require.NotEmpty(t, fns, "no AWS::Serverless::Function in template.yaml")
	return fns
}

// templateEval resolves the intrinsics template.yaml uses with fixed
// parameter values; anything else is an error, so a new intrinsic in the
// environment fails here instead of being skipped.
type templateEval struct {
	tpl    samTemplate
	params map[string]string
}

// evaluator takes every parameter's Default, overridden by values, and
// checks each against its AllowedValues/AllowedPattern as CloudFormation would.
func (tpl samTemplate) evaluator(t *testing.T, values map[string]string) templateEval {
	t.Helper()
	params := map[string]string{}
	for _, p := range tpl.root.get("Parameters").entries() {
		name := p[0].Value
		v, ok := values[name]
		if !ok {
			def := p[1].get("Default")
			require.NotNil(t, def, "parameter %s has no Default: add a sample value to templateSamples", name)
			v = def.Value
		}
		if allowed := p[1].get("AllowedValues"); allowed != nil {
			var list []string
			for _, a := range allowed.Content {
				list = append(list, a.Value)
			}
			assert.Contains(t, list, v, "parameter %s", name)
		}
		if pattern := p[1].get("AllowedPattern"); pattern != nil {
			assert.Regexp(t, regexp.MustCompile(pattern.Value), v, "parameter %s", name)
		}
		params[name] = v
	}
	for name := range values {
		require.Contains(t, params, name, "the test sets %s, which template.yaml does not declare", name)
	}
	return templateEval{tpl: tpl, params: params}
}

// requireRulesHold: the parameter set passes the template's Rules, so
// CloudFormation would accept it.
func (ev templateEval) requireRulesHold(t *testing.T) {
	t.Helper()
	for _, r := range ev.tpl.root.get("Rules").entries() {
		if c := r[1].get("RuleCondition"); c != nil {
			applies, err := ev.truth(c)
			require.NoError(t, err, "rule %s", r[0].Value)
			if !applies {
				continue
			}
		}
		for _, a := range r[1].get("Assertions").Content {
			ok, err := ev.truth((*yamlNode)(a).get("Assert"))
			require.NoError(t, err, "rule %s", r[0].Value)
			require.True(t, ok, "rule %s rejects the parameters", r[0].Value)
		}
	}
}

var pseudoParameters = map[string]string{
	"AWS::StackName": "intentgate-test", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
	"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
}

// intrinsic names a function node (short !Tag or long {Fn::X: arg} form).
func intrinsic(n *yamlNode) (string, *yamlNode) {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		name := strings.TrimPrefix(n.Tag, "!")
		if name != "Ref" && name != "Condition" {
			name = "Fn::" + name
		}
		return name, n
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		if k := n.Content[0].Value; k == "Ref" || strings.HasPrefix(k, "Fn::") {
			return k, (*yamlNode)(n.Content[1])
		}
	}
	return "", nil
}

// eval resolves n to a string, []any or map[string]any; present is false
// for AWS::NoValue (and a nil node).
func (ev templateEval) eval(n *yamlNode) (value any, present bool, err error) {
	if n == nil {
		return nil, false, nil
	}
	switch name, arg := intrinsic(n); name {
	case "":
	case "Ref":
		return ev.ref(arg.Value)
	case "Fn::If":
		if len(arg.Content) != 3 {
			return nil, false, fmt.Errorf("Fn::If wants [condition, then, else], got %d items", len(arg.Content))
		}
		ok, err := ev.condition(arg.Content[0].Value)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return ev.eval((*yamlNode)(arg.Content[1]))
		}
		return ev.eval((*yamlNode)(arg.Content[2]))
	case "Fn::Sub":
		if arg.Kind != yaml.ScalarNode {
			return nil, false, errors.New("Fn::Sub with a variable map is not supported by this test")
		}
		s, err := ev.sub(arg.Value)
		return s, err == nil, err
	case "Fn::GetAtt":
		res, attr, ok := strings.Cut(arg.Value, ".")
		if arg.Kind == yaml.SequenceNode && len(arg.Content) == 2 {
			res, attr, ok = arg.Content[0].Value, arg.Content[1].Value, true
		}
		if !ok || ev.tpl.root.get("Resources", res) == nil {
			return nil, false, fmt.Errorf("Fn::GetAtt %q: no such resource attribute", arg.Value)
		}
		return "arn:aws:placeholder:us-east-1:123456789012:" + res + "/" + attr, true, nil
	default:
		return nil, false, fmt.Errorf("%s is not supported by this test's evaluator", name)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, true, nil
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, ok, err := ev.eval((*yamlNode)(c))
			if err != nil {
				return nil, false, err
			}
			if ok {
				out = append(out, v)
			}
		}
		return out, true, nil
	case yaml.MappingNode:
		out := map[string]any{}
		for _, kv := range n.entries() {
			v, ok, err := ev.eval(kv[1])
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", kv[0].Value, err)
			}
			if ok {
				out[kv[0].Value] = v
			}
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("unexpected YAML node kind %v", n.Kind)
}

// ref resolves a parameter, a pseudo parameter or a resource (a placeholder
// name: physical ids are only known after deployment).
func (ev templateEval) ref(name string) (any, bool, error) {
	if v, ok := ev.params[name]; ok {
		return v, true, nil
	}
	if v, ok := pseudoParameters[name]; ok {
		return v, true, nil
	}
	if name == "AWS::NoValue" {
		return nil, false, nil
	}
	if ev.tpl.root.get("Resources", name) != nil {
		return "intentgate-test-" + name + "-PLACEHOLDER", true, nil
	}
	return nil, false, fmt.Errorf("Ref %s: no such parameter or resource", name)
}

var subVariable = regexp.MustCompile(`\$\{([^}]+)\}`)

func (ev templateEval) sub(s string) (string, error) {
	var errs []error
	out := subVariable.ReplaceAllStringFunc(s, func(m string) string {
		name := subVariable.FindStringSubmatch(m)[1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}" // ${!Literal}
		}
		n := &yamlNode{Kind: yaml.ScalarNode, Tag: "!Ref", Value: name}
		if _, ok := ev.params[name]; !ok && strings.Contains(name, ".") && !strings.HasPrefix(name, "AWS::") {
			n.Tag = "!GetAtt"
		}
		v, _, err := ev.eval(n)
		if err != nil {
			errs = append(errs, err)
			return ""
		}
		return fmt.Sprint(v)
	})
	return out, errors.Join(errs...)
}

func (ev templateEval) condition(name string) (bool, error) {
	c := ev.tpl.root.get("Conditions", name)
	if c == nil {
		return false, fmt.Errorf("no condition %s", name)
	}
	return ev.truth(c)
}

// truth evaluates the condition functions (Conditions and Rules).
func (ev templateEval) truth(n *yamlNode) (bool, error) {
	name, arg := intrinsic(n)
	if name == "" && n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Condition" {
		name, arg = "Condition", (*yamlNode)(n.Content[1])
	}
	if arg == nil {
		return false, fmt.Errorf("%q is not a condition function", n.Value)
	}
	var args []*yamlNode
	for _, c := range arg.Content {
		args = append(args, (*yamlNode)(c))
	}
	switch name {
	case "Condition":
		return ev.condition(arg.Value)
	case "Fn::Equals":
		if len(args) != 2 {
			return false, fmt.Errorf("Fn::Equals wants 2 items, got %d", len(args))
		}
		a, _, err := ev.eval(args[0])
		if err != nil {
			return false, err
		}
		b, _, err := ev.eval(args[1])
		return fmt.Sprint(a) == fmt.Sprint(b), err
	case "Fn::Not":
		if len(args) != 1 {
			return false, fmt.Errorf("Fn::Not wants 1 item, got %d", len(args))
		}
		v, err := ev.truth(args[0])
		return !v, err
	case "Fn::And", "Fn::Or":
		all := name == "Fn::And"
		for _, a := range args {
			v, err := ev.truth(a)
			if err != nil {
				return false, err
			}
			if v != all {
				return v, nil
			}
		}
		return all, nil
	}
	return false, fmt.Errorf("condition function %q is not supported by this test's evaluator", name)
}

// TestTemplateOperatorDefaultIsTheConfigDefault: a stack deployed without
// OperatorName names the same operator in its escalations, tags and alarms
// as a local run without INTENTGATE_OPERATOR.
func TestTemplateOperatorDefaultIsTheConfigDefault(t *testing.T) {
	cfg, err := FromEnv(func(k string) (string, bool) { v, ok := minimalEnv()[k]; return v, ok })
	require.NoError(t, err)
	def := loadTemplate(t).root.get("Parameters", "OperatorName", "Default")
	require.NotNil(t, def, "OperatorName has a Default")
	assert.Equal(t, cfg.Operator, def.Value)
}
