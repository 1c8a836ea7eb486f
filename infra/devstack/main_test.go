package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeRunServesTheWholeSystemAndStopsEverything runs what `make run`
// runs: it waits for the env file, drops a Risk API response, watches the
// reconciler turn UNKNOWN into SUCCEEDED with one downstream review, then
// stops the devstack and checks the engine it started is gone.
func TestMakeRunServesTheWholeSystemAndStopsEverything(t *testing.T) {
	envPath := filepath.Join(t.TempDir(), "env")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-env-file", envPath, "-sweep", "200ms",
			"-table", "devstack-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, io.Discard, io.Discard)
	}()
	env := waitForEnv(t, envPath, done)
	for _, k := range []string{"MCP_URL", "TOKEN_ALICE", "TOKEN_BOB", "TOKEN_DEPLOYER", "TOKEN_OPERATOR", "RISK_API_URL", "RELEASE_API_URL", "DYNAMODB_ENDPOINT"} {
		require.NotEmpty(t, env[k], k)
	}

	resp, err := http.Post(env["RISK_API_URL"]+"/_sim/faults", "application/json",
		strings.NewReader(`{"create":[{"mode":"drop_response_after_commit","times":1}]}`))
	require.NoError(t, err)
	resp.Body.Close()

	cs := connect(t, env["MCP_URL"], env["TOKEN_ALICE"])
	first := callTool(t, cs, "request_risk_review", map[string]any{"order_id": "O20260728001", "reason": "chargeback pattern", "operation_id": "op-devstack-01"})
	require.Equal(t, "UNKNOWN", first["status"])

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

	cancel()
	require.NoError(t, <-done)
	engineAddr := strings.TrimPrefix(env["DYNAMODB_ENDPOINT"], "http://")
	_, err = net.DialTimeout("tcp", engineAddr, time.Second)
	assert.Error(t, err, "the engine the devstack started is stopped with it")
	_, err = http.Get(env["MCP_URL"])
	assert.Error(t, err, "the MCP endpoint is closed")
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
