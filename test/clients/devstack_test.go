package clients

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// devstack is one `make run` system for the whole package: the devstack
// binary built from ./infra/devstack, on free loopback ports, with its own
// table. Its env file is what a person sources.
type devstack struct {
	cmd  *exec.Cmd
	env  map[string]string
	logs string
	done chan error
}

// stack is started by TestMain and read by every test.
var stack *devstack

func TestMain(m *testing.M) {
	os.Exit(runWithDevstack(m))
}

func runWithDevstack(m *testing.M) int {
	dir, err := os.MkdirTemp("", "intentgate-clients-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "clients:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := startDevstack(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clients: starting the devstack:", err)
		return 1
	}
	stack = s
	code := m.Run()
	if err := s.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "clients: stopping the devstack:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "..", "..")
}

func startDevstack(dir string) (*devstack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "devstack")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./infra/devstack")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./infra/devstack: %w\n%s", err, out)
	}
	envPath := filepath.Join(dir, "env")
	logs := filepath.Join(dir, "devstack.log")
	logFile, err := os.Create(logs)
	if err != nil {
		return nil, fmt.Errorf("devstack log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-env-file", envPath, "-sweep", "500ms",
		"-table", "clients-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	cmd.Dir = repoRoot()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start devstack: %w", err)
	}
	s := &devstack{cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("devstack exited before it was up (%v):\n%s", err, s.tail())
		case <-time.After(100 * time.Millisecond):
		}
		env, err := readEnv(envPath)
		if err == nil {
			s.env = env
			return s, nil
		}
	}
	_ = s.stop()
	return nil, fmt.Errorf("the devstack wrote no env file within 2m:\n%s", s.tail())
}

// readEnv parses the shell exports `make run` writes.
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 64*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if !ok {
			return nil, fmt.Errorf("env file line %q", sc.Text())
		}
		unq, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("env file line %q: %w", sc.Text(), err)
		}
		env[k] = unq
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if env["MCP_URL"] == "" || env["TOKEN_OPERATOR"] == "" {
		return nil, errors.New("env file incomplete")
	}
	return env, nil
}

// stop sends the Ctrl-C a person would, so the devstack stops the engine it
// started, and waits for it.
func (s *devstack) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("interrupt devstack: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("the devstack did not stop within 30s of Ctrl-C:\n%s", s.tail())
	}
}

func (s *devstack) tail() string {
	data, _ := os.ReadFile(s.logs)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}
