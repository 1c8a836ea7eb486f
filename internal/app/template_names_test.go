package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// accountWideNames are the name properties of resource types whose names
// are unique in the whole account, not per region: CloudWatch dashboards
// ("All dashboards in your account are global, not region-specific",
// AWS::CloudWatch::Dashboard) and IAM's named resources.
var accountWideNames = map[string]string{
	"AWS::CloudWatch::Dashboard": "DashboardName",
	"AWS::IAM::Role":             "RoleName",
	"AWS::IAM::ManagedPolicy":    "ManagedPolicyName",
	"AWS::IAM::InstanceProfile":  "InstanceProfileName",
}

// TestTemplateAccountWideNamesCarryTheRegion: a stack name is unique per
// region only, so a name that is unique per account must carry the region
// too, else the same stack deployed in a second region fails to create
// ("already exists") and its rollback deletes everything it made.
func TestTemplateAccountWideNamesCarryTheRegion(t *testing.T) {
	tpl := loadTemplate(t)
	var named int
	for _, r := range tpl.root.get("Resources").entries() {
		prop, ok := accountWideNames[r[1].get("Type").Value]
		if !ok {
			continue
		}
		name := r[1].get("Properties", prop)
		if name == nil {
			continue // CloudFormation makes one up from the stack name and a random suffix
		}
		named++
		kind, arg := intrinsic(name)
		require.Equal(t, "Fn::Sub", kind, "%s.%s: a !Sub naming the stack and the region", r[0].Value, prop)
		assert.Contains(t, arg.Value, "${AWS::StackName}", "%s.%s", r[0].Value, prop)
		assert.Contains(t, arg.Value, "${AWS::Region}", "%s.%s: unique per account, so it names the region", r[0].Value, prop)
		v, _, err := tpl.evaluator(t, templateSamples).eval(name)
		require.NoError(t, err)
		if prop == "DashboardName" {
			assert.Regexp(t, `^[A-Za-z0-9_-]{1,255}$`, v, "%s: letters, digits, - and _ only", r[0].Value)
		}
	}
	assert.Positive(t, named, "the dashboard is named: the check must have something to check")
}
