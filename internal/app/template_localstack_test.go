package app

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestLocalStackEnablesEveryServiceTheExpandedStackUses: the compose file
// restricts LocalStack to SERVICES, and with STRICT_SERVICE_LOADING (on by
// default) a call to any other service is refused, so `samlocal deploy`
// fails at the first resource of a service not listed. The SAM transform
// turns every DeploymentPreference into AWS::CodeDeploy::Application and
// ::DeploymentGroup resources and a CodeDeployLambdaAliasUpdate policy,
// whatever its Type (AllAtOnce too, as samconfig.toml's [localstack] sets).
func TestLocalStackEnablesEveryServiceTheExpandedStackUses(t *testing.T) {
	raw, err := os.ReadFile("../../localstack/docker-compose.yml")
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	env := compose.Services["localstack"].Environment
	require.NotEmpty(t, env["SERVICES"], "the compose file restricts the services")
	require.NotEqual(t, "0", env["STRICT_SERVICE_LOADING"])
	enabled := strings.Split(env["SERVICES"], ",")

	service := map[string]string{
		"AWS::DynamoDB::Table": "dynamodb", "AWS::SQS::Queue": "sqs", "AWS::Logs::LogGroup": "logs",
		"AWS::Logs::MetricFilter": "logs", "AWS::IAM::Role": "iam", "AWS::CloudWatch::Alarm": "cloudwatch",
		"AWS::CloudWatch::Dashboard": "cloudwatch", "AWS::Serverless::HttpApi": "apigatewayv2",
		"AWS::Serverless::Function": "lambda",
	}
	need := map[string]string{"cloudformation": "the stack", "s3": "samlocal's artifact upload", "sts": "samlocal's caller identity"}
	tpl := loadTemplate(t)
	for _, r := range tpl.root.get("Resources").entries() {
		typ := r[1].get("Type").Value
		svc, ok := service[typ]
		require.True(t, ok, "%s: which LocalStack service serves %s? add it to this test", r[0].Value, typ)
		need[svc] = r[0].Value
		if typ != "AWS::Serverless::Function" {
			continue
		}
		if r[1].get("Properties", "DeploymentPreference") != nil {
			need["codedeploy"] = r[0].Value + " (DeploymentPreference)"
		}
		for _, ev := range r[1].get("Properties", "Events").entries() {
			switch ev[1].get("Type").Value {
			case "DynamoDB":
				need["dynamodbstreams"] = r[0].Value + "." + ev[0].Value
			case "Schedule":
				need["events"] = r[0].Value + "." + ev[0].Value
			}
		}
	}
	for svc, why := range need {
		assert.True(t, slices.Contains(enabled, svc), "localstack/docker-compose.yml SERVICES lacks %s, which %s needs", svc, why)
	}
}
