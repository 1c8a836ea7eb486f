package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeRunServesTheWholeSystemAndStopsEverything runs what `make run`
// runs, with the template's sweep rate (one minute): it drops a Risk API
// response and watches the stream path (the local event source mapping)
// turn UNKNOWN into SUCCEEDED with one downstream review within seconds,
// long before the first sweep; then it stops the devstack and checks the
// engine it started is gone.
func TestMakeRunServesTheWholeSystemAndStopsEverything(t *testing.T) {
	d := startDevstack(t)
	env := d.env
	for _, k := range []string{"MCP_URL", "TOKEN_ALICE", "TOKEN_BOB", "TOKEN_DEPLOYER", "TOKEN_OPERATOR", "RISK_API_URL", "RELEASE_API_URL", "DYNAMODB_ENDPOINT"} {
		require.NotEmpty(t, env[k], k)
	}

	resp, err := http.Post(env["RISK_API_URL"]+"/_sim/faults", "application/json",
		strings.NewReader(`{"create":[{"mode":"drop_response_after_commit","times":1}]}`))
	require.NoError(t, err)
	resp.Body.Close()

	cs := connect(t, env["MCP_URL"], env["TOKEN_ALICE"])
	first := callTool(t, cs, "request_risk_review", map[string]any{"order_id": "O20260728001", "reason": "chargeback pattern", "operation_id": "op-devstack-01"})
	require.Equal(t, "UNKNOWN", first["status"], "%v\n%s", first, d.out.String())

	deadline := time.Now().Add(30 * time.Second)
	var status map[string]any
	for time.Now().Before(deadline) {
		status = callTool(t, cs, "get_risk_review_status", map[string]any{"review_id": first["review_id"]})
		if status["status"] == "SUCCEEDED" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, "SUCCEEDED", status["status"], "the devstack's reconciler converged the dropped response")
	assert.Contains(t, d.log.String(), `msg="stream batch delivered" path=stream`, "the stream path delivered it")
	assert.NotContains(t, d.log.String(), "reconciled by the sweep", "the sweep (every minute) did not run yet")
	assert.Contains(t, d.out.String(), `"msg":"stream record reconciled"`)

	stats, err := http.Get(env["RISK_API_URL"] + "/_sim/stats")
	require.NoError(t, err)
	var st struct {
		CreateCalls      int `json:"create_calls"`
		ReviewsCommitted int `json:"reviews_committed"`
	}
	require.NoError(t, json.NewDecoder(stats.Body).Decode(&st))
	stats.Body.Close()
	assert.Equal(t, 1, st.CreateCalls)
	assert.Equal(t, 1, st.ReviewsCommitted)

	require.NoError(t, d.stop())
	engineAddr := strings.TrimPrefix(env["DYNAMODB_ENDPOINT"], "http://")
	_, err = net.DialTimeout("tcp", engineAddr, time.Second)
	assert.Error(t, err, "the engine the devstack started is stopped with it")
	_, err = http.Get(env["MCP_URL"])
	assert.Error(t, err, "the MCP endpoint is closed")
}

// When the engine dies under a running `make run` (killed, out of memory,
// a crash in moto), the devstack must stop and say so, whatever reconciler
// triggers it runs: otherwise it keeps serving an MCP endpoint whose every
// write answers TEMPORARY_UNAVAILABLE. With the stream trigger on, the
// poller's failing GetRecords happened to stop it; with -stream=false
// nothing did.
func TestMakeRunStopsWhenItsEngineDies(t *testing.T) {
	for _, streamOn := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(streamOn), func(t *testing.T) {
			d := startDevstack(t, "-stream="+strconv.FormatBool(streamOn))
			pid := childEngine(t)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			select {
			case <-d.exited:
			case <-time.After(15 * time.Second):
				t.Fatalf("make run still running 15 s after its engine died:\n%s", d.log.String())
			}
			require.Error(t, d.exitErr)
			assert.Contains(t, d.exitErr.Error(), "engine exited")
		})
	}
}

// childEngine is the pid of the one moto launcher this test process started.
func childEngine(t *testing.T) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var found []int
	for _, dir := range dirs {
		pid, err := strconv.Atoi(dir.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", dir.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", dir.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte("moto_server.py")) {
			found = append(found, pid)
		}
	}
	require.Len(t, found, 1, "moto launchers started by this test process")
	return found[0]
}

// devstack is a running `make run`.
type devstack struct {
	env  map[string]string
	log  *syncBuffer // the banner and progress (stderr)
	out  *syncBuffer // audit records, metrics and the replicas' logs (stdout)
	stop func() error
	// exited is closed when run returned by itself or by stop; exitErr is
	// what it returned (read it after exited is closed).
	exited  chan struct{}
	exitErr error
}

func startDevstack(t *testing.T, args ...string) *devstack {
	t.Helper()
	envPath := filepath.Join(t.TempDir(), "env")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	d := &devstack{log: &syncBuffer{}, out: &syncBuffer{}, exited: make(chan struct{})}
	args = append([]string{"-addr", "127.0.0.1:0", "-env-file", envPath,
		"-table", "devstack-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, args...)
	go func() {
		d.exitErr = run(ctx, args, d.out, d.log)
		close(d.exited)
	}()
	go func() {
		<-d.exited
		done <- d.exitErr
	}()
	d.stop = func() error {
		cancel()
		<-d.exited
		return d.exitErr
	}
	t.Cleanup(func() { _ = d.stop() })
	d.env = waitForEnv(t, envPath, done)
	return d
}

// syncBuffer is a bytes.Buffer the devstack's goroutines may write to
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitForEnv(t *testing.T, path string, done <-chan error) map[string]string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("devstack exited before it was up: %v", err)
		default:
		}
		if f, err := os.Open(path); err == nil {
			env := map[string]string{}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64*1024), 64*1024)
			for sc.Scan() {
				k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
				require.True(t, ok, sc.Text())
				unq, err := strconv.Unquote(v)
				require.NoError(t, err)
				env[k] = unq
			}
			f.Close()
			return env
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the devstack did not write its env file")
	return nil
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "devstack-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	return body
}
