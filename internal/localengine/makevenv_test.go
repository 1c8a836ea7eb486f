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

// The pinned engine packages need Python 3.11 or later (joserfc 1.8.0, a
// dependency of moto[server], says Requires-Python >=3.11). A machine
// whose python3 is older (Ubuntu 22.04: 3.10; macOS's own python3: 3.9)
// got pip's "ResolutionImpossible" from `make run`. make must say what is
// needed instead, and leave nothing behind.
func TestMakeVenvRefusesAPythonOlderThan311WithAClearMessage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not on PATH")
	}
	root, err := RepoRoot()
	require.NoError(t, err)
	bin := t.TempDir()
	// python3 3.10: fails the version check, creates virtualenvs whose pip
	// answers like pip on 3.10 does.
	fake := `#!/bin/sh
case "$1" in
--version) echo "Python 3.10.12"; exit 0 ;;
-c) exit 1 ;;
-m) mkdir -p "$3/bin"; printf '#!/bin/sh\necho "ERROR: ResolutionImpossible" >&2; exit 1\n' > "$3/bin/python"; chmod +x "$3/bin/python"; exit 0 ;;
esac
exit 1
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "python3"), []byte(fake), 0o755))
	venv := filepath.Join(t.TempDir(), "venv")

	cmd := exec.CommandContext(t.Context(), "make", "-C", root, "VENV="+venv, "PYTHON_CANDIDATES=python3", filepath.Join(venv, ".installed"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHON=") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "make succeeded with Python 3.10:\n%s", out)
	require.Contains(t, string(out), "needs Python 3.11 or later", "%s", out)
	_, err = os.Stat(venv)
	require.True(t, os.IsNotExist(err), "a virtualenv was created with Python 3.10")
}
