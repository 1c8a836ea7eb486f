package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/schemacheck"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/testsync"
)

var engine *enginetest.Engine

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
}

const (
	protocolNew = "2026-07-28"
	protocolOld = "2025-11-25"
)

type harness struct {
	*stack.Stack
	out *testsync.Buffer // the replicas' audit output
}

// startStack runs replicas MCP servers on one fresh table of the shared
// engine, with small budgets so timeouts are quick.
func startStack(t *testing.T, replicas int, env map[string]string) harness {
	t.Helper()
	return startStackWith(t, replicas, env, stack.Config{})
}

// startStackWith lets a test set the clock and the release search lag.
func startStackWith(t *testing.T, replicas int, env map[string]string, extra stack.Config) harness {
	t.Helper()
	ctx := context.Background()
	addrs := make([]string, replicas)
	for i := range addrs {
		addrs[i] = "127.0.0.1:0"
	}
	merged := map[string]string{
		"INTENTGATE_BUDGET_DOWNSTREAM": "800ms",
		"INTENTGATE_BUDGET_AUTH":       "500ms",
		"INTENTGATE_BUDGET_RESERVE":    "1s",
	}
	for k, v := range env {
		merged[k] = v
	}
	out := &testsync.Buffer{}
	s, err := stack.Start(ctx, stack.Config{
		EngineEndpoint: engine.Endpoint(), Table: enginetest.TableName(t), MCPAddrs: addrs,
		ResourceURL: "https://intentgate.test/mcp", Env: merged, Out: out,
		Clock: extra.Clock, ReleaseSearchLag: extra.ReleaseSearchLag,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Apps[0].Store.DeleteTable(context.Background())
		s.Stop()
	})
	return harness{Stack: s, out: out}
}

func persona(name string) stack.Persona {
	for _, p := range stack.Personas() {
		if p.Name == name {
			return p
		}
	}
	panic("no persona " + name)
}

func (h harness) token(t *testing.T, name string) string {
	t.Helper()
	tok, err := h.Token(persona(name), time.Hour)
	require.NoError(t, err)
	return tok
}

// bearer adds the caller's token and an optional Idempotency-Key.
type bearer struct {
	token, idempotencyKey string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.idempotencyKey != "" {
		r.Header.Set("Idempotency-Key", b.idempotencyKey)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, token, protocol string) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, url, bearer{token: token}, protocol)
}

func connectWith(t *testing.T, url string, rt http.RoundTripper, protocol string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(testContext(t), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call runs a tool and decodes its structured content.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	return callCtx(t, testContext(t), cs, tool, args)
}

// callCtx is call under the caller's context.
func callCtx(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	requireConforms(t, ctx, cs, tool, res)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	return body, res.IsError
}

// requireConforms checks a result against the outputSchema the server
// advertises for the tool, with an independent validator: every result any
// test here produces, success or error, is checked.
func requireConforms(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, res *mcp.CallToolResult) {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, advertised := range list.Tools {
		if advertised.Name != tool {
			continue
		}
		schema, err := schemacheck.Compile(advertised.OutputSchema)
		require.NoError(t, err, tool)
		require.NoError(t, schema.Validate(res.StructuredContent), "%s (isError %v) does not conform to its outputSchema", tool, res.IsError)
		return
	}
	t.Fatalf("tool %s is not listed", tool)
}

// newTestClock is a settable clock shared by the replicas, the reconciler
// and the simulators, so settle windows and backoffs pass without sleeping.
func newTestClock() *testclock.Clock { return testclock.New(time.Now().UTC()) }
