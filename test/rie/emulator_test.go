//go:build linux

package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/testsync"
)

// emulator is one running aws-lambda-rie with one bootstrap.
type emulator struct {
	cmd       *exec.Cmd
	invokeURL string
	out       *testsync.Buffer // the emulator's and the bootstrap's stdout and stderr
	exited    chan struct{}
	stopOnce  sync.Once
	// seen are the bootstrap processes observed while running; the
	// emulator puts each in its own process group, so stop kills those too.
	mu   sync.Mutex
	seen map[int]struct{}
	// roundTrip is how long the last invoke took from sending the event to
	// reading the answer's last byte: what a caller waits, without this
	// harness's own bookkeeping or decoding (make bench-coldstart).
	roundTrip time.Duration
}

// startEmulator runs bootstrap under the emulator with env as the whole
// environment (the emulator hands it on to the bootstrap). Both of the
// emulator's listeners are on loopback ports picked now, so emulators of
// parallel tests never collide. It is stopped at cleanup.
func startEmulator(t *testing.T, bin, bootstrap string, env map[string]string) *emulator {
	t.Helper()
	runtimeAPI, invoke := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin,
		"--log-level", "info",
		"--runtime-api-address", runtimeAPI,
		"--runtime-interface-emulator-address", invoke,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Own process group, and killed by the kernel if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	e := &emulator{cmd: cmd, invokeURL: "http://" + invoke + "/2015-03-31/functions/function/invocations",
		out: &testsync.Buffer{}, exited: make(chan struct{}), seen: map[int]struct{}{}}
	cmd.Stdout, cmd.Stderr = e.out, e.out
	require.NoError(t, cmd.Start(), "start emulator")
	go func() { _ = cmd.Wait(); close(e.exited) }()
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("stop emulator: %v", err)
		}
		if t.Failed() {
			t.Logf("emulator %s output:\n%s", filepath.Base(filepath.Dir(bootstrap)), e.out.String())
		}
	})
	e.waitListening(t, invoke)
	return e
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func (e *emulator) waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-e.exited:
			t.Fatalf("emulator exited before listening on %s:\n%s", addr, e.out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator not listening on %s after 15s:\n%s", addr, e.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// invoke posts one event and returns the function's response payload,
// failing the test on a function error.
func (e *emulator) invoke(t *testing.T, event []byte) []byte {
	t.Helper()
	body, functionError := e.invokeRaw(t, event)
	require.Empty(t, functionError, "function error: %s", body)
	return body
}

// invokeRaw posts one event and returns the payload and the function error
// the emulator reports (its error type, or the HTTP status when it answers
// otherwise than 200; empty when the function succeeded).
func (e *emulator) invokeRaw(t *testing.T, event []byte) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.invokeURL, bytes.NewReader(event))
	require.NoError(t, err)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "invoke")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	e.mu.Lock()
	e.roundTrip = time.Since(start)
	e.mu.Unlock()
	require.NoError(t, err)
	e.recordBootstraps()
	errType := resp.Header.Get("X-Amz-Function-Error") + resp.Header.Get("Lambda-Runtime-Function-Error-Type")
	if errType == "" && resp.StatusCode != http.StatusOK {
		errType = resp.Status
	}
	return body, errType
}

// lastRoundTrip is the round trip of the last invoke.
func (e *emulator) lastRoundTrip() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.roundTrip
}

// recordBootstraps remembers the emulator's children (the bootstrap).
func (e *emulator) recordBootstraps() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, pid := range childrenOf(e.cmd.Process.Pid) {
		e.seen[pid] = struct{}{}
	}
}

// bootstraps lists the bootstrap processes seen so far.
func (e *emulator) bootstraps() []int {
	e.recordBootstraps()
	e.mu.Lock()
	defer e.mu.Unlock()
	pids := make([]int, 0, len(e.seen))
	for pid := range e.seen {
		pids = append(pids, pid)
	}
	return pids
}

// stop asks the emulator to shut down (SIGTERM: it resets the sandbox,
// terminating the bootstrap, and exits), then kills the emulator's process
// group and each bootstrap's group whatever happened, and waits until none
// of those processes is left.
func (e *emulator) stop() error {
	var err error
	e.stopOnce.Do(func() {
		pids := e.bootstraps()
		pid := e.cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		for _, b := range pids {
			_ = syscall.Kill(-b, syscall.SIGKILL)
		}
		<-e.exited
		err = waitGone(append(pids, pid), 5*time.Second)
	})
	return err
}

// waitGone waits until no pid is a live process (zombies count as gone:
// once the emulator exits, init reaps its orphans).
func waitGone(pids []int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var alive []int
		for _, pid := range pids {
			if processAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still running after %s: %v", within, alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reads /proc/<pid>/stat: absent or a zombie is not alive.
func processAlive(pid int) bool {
	state, _, err := procStat(pid)
	return err == nil && state != "Z" && state != "X"
}

// childrenOf scans /proc for the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, ent := range entries {
		child, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if _, ppid, err := procStat(child); err == nil && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// procStat returns the state and parent pid of a process. The command name
// in /proc/<pid>/stat may hold spaces and parentheses, so fields are read
// after the last ')'.
func procStat(pid int) (state string, ppid int, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return "", 0, errors.New("malformed /proc stat")
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, fmt.Errorf("parent of %d: %w", pid, err)
	}
	return fields[0], ppid, nil
}
