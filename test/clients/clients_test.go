package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/schemacheck"
)

const (
	protocolNew = "2026-07-28"
	protocolOld = "2025-11-25"
)

// shown is a tool result as a client showed it.
type shown struct {
	IsError           bool           `json:"isError"`
	StructuredContent map[string]any `json:"structuredContent"`
}

// scenario is what one client run showed, in the shape scenario.mjs and
// scenario.py print.
type scenario struct {
	Protocol string   `json:"protocol"`
	Tools    []string `json:"tools"`
	Write    shown    `json:"write"`
	Refused  shown    `json:"refused"`
	Status   shown    `json:"status"`
}

func TestGoSDKClient(t *testing.T) {
	for protocol, order := range map[string]string{protocolNew: "O20260728001", protocolOld: "O20260728002"} {
		t.Run(protocol, func(t *testing.T) {
			judge(t, protocol, goScenario(t, protocol, order))
		})
	}
}

func TestTypeScriptSDKClient(t *testing.T) {
	node := nodeBinary(t)
	for protocol, order := range map[string]string{protocolNew: "O20260728003", protocolOld: "O20260728004"} {
		t.Run(protocol, func(t *testing.T) {
			out := run(t, node, "scenario.mjs", stack.env["MCP_URL"], protocol, order)
			judge(t, protocol, decode(t, out))
		})
	}
}

func TestPythonSDKClient(t *testing.T) {
	python := filepath.Join(repoRoot(), ".venv-clients", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the Python MCP SDK client is not installed (%v): run `make client-deps`", err)
	}
	for protocol, order := range map[string]string{protocolNew: "O20260728005", protocolOld: "O20260728006"} {
		t.Run(protocol, func(t *testing.T) {
			out := run(t, python, filepath.Join("python", "scenario.py"), stack.env["MCP_URL"], protocol, order)
			judge(t, protocol, decode(t, out))
		})
	}
}

// TestInspectorCLI runs the scenario as a person would with
// `mcp-inspector --cli URL --header "Authorization: Bearer …"`. The
// Inspector validates structuredContent against the outputSchema and shows
// a schema complaint instead of a result that does not conform.
func TestInspectorCLI(t *testing.T) {
	node := nodeBinary(t)
	inspector := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(inspector); err != nil {
		t.Fatalf("the MCP Inspector is not installed (%v): run `make client-deps`", err)
	}
	home := t.TempDir() // the Inspector keeps a catalog under $HOME
	cli := func(token string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(node, append([]string{inspector, "--cli", stack.env["MCP_URL"],
			"--header", "Authorization: Bearer " + token}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		// Exit status 5 is the Inspector's "the tool returned isError".
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 5) {
			t.Fatalf("mcp-inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.Bytes(), stderr.Bytes())
		}
		return firstJSON(t, stdout.Bytes())
	}
	var out scenario
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(cli(stack.env["TOKEN_ALICE"], "--method", "tools/list"), &list))
	for _, tool := range list.Tools {
		out.Tools = append(out.Tools, tool.Name)
	}
	call := func(token string, args ...string) shown {
		var s shown
		require.NoError(t, json.Unmarshal(cli(token, append([]string{"--method", "tools/call"}, args...)...), &s))
		return s
	}
	out.Write = retryWhileAllowed(func() shown {
		return call(stack.env["TOKEN_ALICE"], "--tool-name", "request_risk_review",
			"--tool-arg", "order_id=O20260728007", "reason=client test (Inspector)", "operation_id=inspector-O20260728007")
	})
	out.Refused = call(stack.env["TOKEN_BOB"], "--tool-name", "request_risk_review",
		"--tool-arg", "order_id=O20260728007", "reason=not my order")
	reviewID, _ := out.Write.StructuredContent["review_id"].(string)
	out.Status = pollStatus(func() shown {
		return call(stack.env["TOKEN_ALICE"], "--tool-name", "get_risk_review_status", "--tool-arg", "review_id="+reviewID)
	})
	judge(t, "", out)
}

// goScenario is the scenario with the official go-sdk client.
func goScenario(t *testing.T, protocol, order string) scenario {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := goConnect(t, ctx, stack.env["TOKEN_ALICE"], protocol)
	bob := goConnect(t, ctx, stack.env["TOKEN_BOB"], protocol)
	var out scenario
	out.Protocol = protocol
	list, err := alice.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tool := range list.Tools {
		out.Tools = append(out.Tools, tool.Name)
	}
	call := func(cs *mcp.ClientSession, name string, args map[string]any) shown {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		s := shown{IsError: res.IsError}
		require.NoError(t, json.Unmarshal(raw, &s.StructuredContent))
		return s
	}
	out.Write = retryWhileAllowed(func() shown {
		return call(alice, "request_risk_review", map[string]any{"order_id": order, "reason": "client test (go-sdk)", "operation_id": "go-" + protocol + "-" + order})
	})
	out.Refused = call(bob, "request_risk_review", map[string]any{"order_id": order, "reason": "not my order"})
	out.Status = pollStatus(func() shown {
		return call(alice, "get_risk_review_status", map[string]any{"review_id": out.Write.StructuredContent["review_id"]})
	})
	return out
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func goConnect(t *testing.T, ctx context.Context, token, protocol string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "intentgate-client-test-go", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: stack.env["MCP_URL"], HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// retryWhileAllowed repeats a write the way its result allows: a refusal
// with retry_allowed (TEMPORARY_UNAVAILABLE, OVERLOADED: nothing was sent)
// is sent again with the same operation_id. Bounded by count.
func retryWhileAllowed(write func() shown) shown {
	var s shown
	for range 10 {
		s = write()
		if !s.IsError || s.StructuredContent["retry_allowed"] != true {
			return s
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

// pollStatus reads the status as the result tells a client to: until the
// review settles (a loaded machine may answer the write while PENDING, or
// time the first dispatch out into RETRYABLE for the reconciler), and again
// after a refusal that allows it.
// Bounded by count, not by a clock.
func pollStatus(read func() shown) shown {
	var s shown
	for range 120 {
		s = read()
		retry := s.IsError && s.StructuredContent["retry_allowed"] == true
		if st := s.StructuredContent["status"]; !retry && st != "PENDING" && st != "UNKNOWN" && st != "RETRYABLE" {
			return s
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

// judge is the scenario's specification, the same for every client.
func judge(t *testing.T, protocol string, out scenario) {
	t.Helper()
	if protocol != "" {
		assert.Equal(t, protocol, out.Protocol, "negotiated protocol")
	}
	assert.Subset(t, out.Tools, []string{"request_risk_review", "get_risk_review_status", "create_deployment_ticket",
		"approve_rollout", "get_operation", "resolve_operation"})

	schemas := advertisedSchemas(t)
	conforms := func(what, tool string, s shown) {
		t.Helper()
		assert.NoError(t, schemas[tool].Validate(s.StructuredContent), "%s conforms to %s's outputSchema", what, tool)
	}

	conforms("the write", "request_risk_review", out.Write)
	reviewID, _ := out.Write.StructuredContent["review_id"].(string)
	require.NotEmpty(t, reviewID, "the write names its review: %v", out.Write)
	if out.Write.IsError {
		// Accepted, outcome not yet known: the only refusal a good write may meet.
		assert.Equal(t, "OPERATION_UNKNOWN", out.Write.StructuredContent["code"], "%v", out.Write)
	} else {
		assert.Equal(t, "SUCCEEDED", out.Write.StructuredContent["status"], "%v", out.Write)
	}

	conforms("the refusal", "request_risk_review", out.Refused)
	assert.True(t, out.Refused.IsError, "%v", out.Refused)
	assert.Equal(t, "FORBIDDEN", out.Refused.StructuredContent["code"], "the refusal is shown with its code: %v", out.Refused)
	assert.Equal(t, false, out.Refused.StructuredContent["retry_allowed"])

	conforms("the status", "get_risk_review_status", out.Status)
	assert.False(t, out.Status.IsError, "%v", out.Status)
	assert.Equal(t, reviewID, out.Status.StructuredContent["review_id"])
	assert.Equal(t, "SUCCEEDED", out.Status.StructuredContent["status"], "%v", out.Status)
	assert.Equal(t, "committed_and_verified", out.Status.StructuredContent["outcome"])
}

// advertisedSchemas are the outputSchemas tools/list shows, compiled with
// the independent validator.
func advertisedSchemas(t *testing.T) map[string]*schemacheck.Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := goConnect(t, ctx, stack.env["TOKEN_ALICE"], protocolNew).ListTools(ctx, nil)
	require.NoError(t, err)
	out := map[string]*schemacheck.Schema{}
	for _, tool := range list.Tools {
		s, err := schemacheck.Compile(tool.OutputSchema)
		require.NoError(t, err, tool.Name)
		out[tool.Name] = s
	}
	return out
}

// nodeBinary is the Node 22 runtime package.json installs.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node := filepath.Join("node_modules", ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("the node clients are not installed (%v): run `make client-deps`", err)
	}
	abs, err := filepath.Abs(node)
	require.NoError(t, err)
	return abs
}

// run runs a scenario script with the personas' tokens and returns stdout.
func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "TOKEN_ALICE="+stack.env["TOKEN_ALICE"], "TOKEN_BOB="+stack.env["TOKEN_BOB"],
		"TOKEN_DEPLOYER="+stack.env["TOKEN_DEPLOYER"])
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s %v\nstdout: %s\nstderr: %s", bin, args, stdout.Bytes(), stderr.Bytes())
	return stdout.Bytes()
}

func decode(t *testing.T, out []byte) scenario {
	t.Helper()
	var s scenario
	require.NoError(t, json.Unmarshal(firstJSON(t, out), &s), "%s", out)
	return s
}

// firstJSON is the first JSON value in a client's stdout (the Inspector may
// print an error object after the result).
func firstJSON(t *testing.T, out []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var raw json.RawMessage
	require.NoError(t, dec.Decode(&raw), "stdout: %s", out)
	return raw
}
