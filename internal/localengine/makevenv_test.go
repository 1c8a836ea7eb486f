package localengine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A virtualenv outlives the interpreter it was made from: upgrading or
// removing that Python (pyenv, Homebrew, a distribution upgrade) leaves
// .venv/bin/python dangling while .venv/.installed is still newer than the
// requirements. Start then answers ErrNotInstalled, "run `make venv`", so
// `make venv` (and `make run`, `make test`) must rebuild such a virtualenv
// rather than find it up to date.
func TestMakeVenvRebuildsAVirtualenvWhosePythonIsGone(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not on PATH")
	}
	root, err := RepoRoot()
	require.NoError(t, err)
	stamps := map[string]string{"VENV": ".installed", "TOOLS_VENV": ".installed", "CLIENTS_VENV": ".installed"}
	for variable, stamp := range stamps {
		t.Run(variable, func(t *testing.T) {
			venv := filepath.Join(t.TempDir(), "venv")
			require.NoError(t, os.MkdirAll(filepath.Join(venv, "bin"), 0o755))
			require.NoError(t, os.Symlink("/nonexistent/python3", filepath.Join(venv, "bin", "python")))
			stampPath := filepath.Join(venv, stamp)
			require.NoError(t, os.WriteFile(stampPath, nil, 0o644)) // newer than the checked-out requirements

			cmd := exec.CommandContext(t.Context(), "make", "-n", "-C", root, variable+"="+venv, stampPath)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.True(t, strings.Contains(string(out), "-m venv "+venv),
				"make treats a virtualenv without a working python as up to date:\n%s", out)
		})
	}
}
