package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The functions link no AWS SDK client whose serializers are driven by the
// generated schema tables (service/<name>/schemas): those are package-level
// values built before main on every cold start, about 1.4 ms of CPU for
// SSM's and 0.6 ms for DynamoDB's against a bare MCP bootstrap's 5 ms
// (docs/deploy.md, Cold start). go.mod pins the last client versions with
// the earlier serializers. An upgrade past them fails here on purpose: it is
// a choice to make with its cost in view (measure with make bench-coldstart,
// update docs/deploy.md, then this test), not a side effect of a bump.
func TestTheFunctionsLinkNoSDKSchemaTables(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-tags", "lambda.norpc", ".", "../reconciler")
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", out)
	var tables []string
	for pkg := range strings.Lines(string(out)) {
		pkg = strings.TrimSpace(pkg)
		if strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/") && strings.HasSuffix(pkg, "/schemas") {
			tables = append(tables, pkg)
		}
	}
	assert.Empty(t, tables, "SDK clients whose schema tables are built at every cold start")
}
