package localengine

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Production binaries (the Lambda functions and every command under infra,
// make run's devstack among them) start the engine through this package and
// must not link package testing: test helpers stay in internal/enginetest.
func TestNoMainPackageLinksTesting(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{join .Deps " "}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", out)

	var mains []string
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		mains = append(mains, fields[0])
		assert.False(t, slices.Contains(fields[1:], "testing"), "%s links package testing", fields[0])
	}
	assert.Contains(t, mains, "github.com/intentgate/intentgate/infra/devstack", "the check saw make run's binary")
}
