package main

import (
	"os/exec"
	"strconv"
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

// Our packages build almost nothing before main: a regular expression
// compiled into a package-level variable, a table built from reflection or
// a schema parsed at init is paid by every cold start, whether the request
// needs it or not. What our packages allocate at init is counted by the
// runtime itself (GODEBUG=inittrace=1), so this holds on any machine; a
// single compiled expression takes several KiB.
func TestOurPackagesAllocateAlmostNothingAtInit(t *testing.T) {
	const limitBytes = 2048
	for _, pkg := range []string{".", "../reconciler"} {
		bin := t.TempDir() + "/bootstrap"
		build := exec.CommandContext(t.Context(), "go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
		run := exec.CommandContext(t.Context(), bin)
		run.Env = []string{"GODEBUG=inittrace=1"}
		out, _ = run.CombinedOutput() // stops at once: no configuration
		var ours int
		for line := range strings.Lines(string(out)) {
			// init <package> @<start> ms, <clock> ms clock, <bytes> bytes, <n> allocs
			f := strings.Fields(line)
			if len(f) < 9 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/intentgate/") {
				continue
			}
			ours++
			bytes, err := strconv.Atoi(f[7])
			require.NoError(t, err, "inittrace line %q", line)
			assert.LessOrEqual(t, bytes, limitBytes, "%s (in %s) allocates at init: %s", f[1], pkg, strings.TrimSpace(line))
		}
		require.Positive(t, ours, "%s: no inittrace line for our packages:\n%s", pkg, out)
	}
}
