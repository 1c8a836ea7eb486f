package localengine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled means the project virtualenv holding moto is missing.
var ErrNotInstalled = errors.New("local engine not installed: run `make venv` (make test does it)")

const (
	launcherPath = "infra/engine/moto_server.py"
	venvPython   = ".venv/bin/python"
	// Cold start of the launcher (importing moto) takes about a second;
	// the margin is for a loaded CI machine.
	startTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
)

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repo root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// motoProcess is a running infra/engine/moto_server.py.
type motoProcess struct {
	cmd      *exec.Cmd
	endpoint string
	exited   chan struct{} // closed once Wait returned
	waitErr  error         // valid after exited is closed
	tail     *tailBuffer   // the last of its stderr
	stopOnce sync.Once
	stopErr  error
}

// startMoto launches the moto launcher (one request at a time) from the project
// virtualenv on a free loopback port and waits for its LISTENING line.
func startMoto(ctx context.Context, root string, launcherArgs ...string) (*motoProcess, error) {
	python := filepath.Join(root, venvPython)
	if _, err := os.Stat(python); err != nil {
		return nil, fmt.Errorf("%w (%s: %v)", ErrNotInstalled, python, err)
	}
	args := append([]string{launcherPath, "--host", "127.0.0.1", "--port", "0"}, launcherArgs...)
	cmd := exec.Command(python, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = engineProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}
	// moto's errors stay visible on stderr; the tail also goes
	// into the start-up error.
	tail := &tailBuffer{max: 4096}
	cmd.Stderr = io.MultiWriter(os.Stderr, tail)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}

	p := &motoProcess{cmd: cmd, exited: make(chan struct{}), tail: tail}
	ports := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if port, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				select {
				case ports <- port:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	go func() {
		<-readDone // Wait closes the pipe: read everything first
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case port := <-ports:
		if _, err := strconv.Atoi(port); err != nil {
			_ = p.stop()
			return nil, fmt.Errorf("start moto: bad LISTENING line %q", port)
		}
		p.endpoint = "http://127.0.0.1:" + port
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("start moto: exited before listening (%v): %s", p.waitErr, tail.String())
	case <-timer.C:
		_ = p.stop()
		return nil, fmt.Errorf("start moto: no LISTENING line within %s: %s", startTimeout, tail.String())
	case <-ctx.Done():
		_ = p.stop()
		return nil, fmt.Errorf("start moto: %w", ctx.Err())
	}
}

// stop sends SIGTERM to the engine's process group, SIGKILL if it lingers,
// and waits for the process.
func (p *motoProcess) stop() error {
	p.stopOnce.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.exited
		}
		var exitErr *exec.ExitError
		if p.waitErr != nil && !errors.As(p.waitErr, &exitErr) {
			p.stopErr = fmt.Errorf("stop moto: %w", p.waitErr)
		}
	})
	return p.stopErr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
