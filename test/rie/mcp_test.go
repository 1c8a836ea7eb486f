//go:build linux

package rie

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// TestMCPFunctionUnderEmulatorListsAndCallsTools runs the real MCP binary
// under the emulator with the recorded API Gateway events, their bearer
// token replaced by one the test's issuer minted for the configured audience.
func TestMCPFunctionUnderEmulatorListsAndCallsTools(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	em := startEmulator(t, b.emulator, b.mcp, sys.functionEnv("intentgate-mcp"))
	token, err := sys.issuer.Mint(issuer.Claims{
		Subject: "alice", ClientID: "support-assistant", MerchantID: "M1", Audience: resourceURL, TTL: time.Hour,
	})
	require.NoError(t, err)

	t.Run("tools/list", func(t *testing.T) {
		resp := invokeHTTP(t, em, withBearer(t, sample(t, "apigw-tools-list.json"), token))
		require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", resp.Body)
		var result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(rpcResult(t, resp), &result))
		var names []string
		for _, tool := range result.Tools {
			names = append(names, tool.Name)
		}
		assert.Contains(t, names, "request_risk_review")
	})

	t.Run("tools/call request_risk_review", func(t *testing.T) {
		resp := invokeHTTP(t, em, withBearer(t, sample(t, "apigw-tools-call-risk-review.json"), token))
		require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", resp.Body)
		var result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(rpcResult(t, resp), &result))
		assert.False(t, result.IsError, "%v", result.StructuredContent)
		assert.Equal(t, "SUCCEEDED", result.StructuredContent["status"], "%v", result.StructuredContent)
		assert.Equal(t, 1, sys.risk.Stats().CreateCalls)
	})

	assertStopsClean(t, em)
}

// Request _meta keys of the sessionless protocol (SEP-2575).
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// withBearer replaces the sample's placeholder Authorization header, and
// completes its JSON-RPC body the way a client of the protocol version in
// its Mcp-Protocol-Version header sends it: that version, the client's
// capabilities and info in params._meta (kept when the sample has them).
func withBearer(t *testing.T, event []byte, token string) []byte {
	t.Helper()
	var ev map[string]any
	require.NoError(t, json.Unmarshal(event, &ev))
	headers, ok := ev["headers"].(map[string]any)
	require.True(t, ok, "the sample has headers")
	require.Contains(t, headers, "authorization", "the sample carries a bearer token to replace")
	headers["authorization"] = "Bearer " + token

	version, _ := headers["mcp-protocol-version"].(string)
	require.NotEmpty(t, version, "the sample carries Mcp-Protocol-Version")
	body, _ := ev["body"].(string)
	require.False(t, ev["isBase64Encoded"] == true, "a plain-text body")
	var msg map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &msg))
	params, _ := msg["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	defaults := map[string]any{
		metaProtocolVersion:    version,
		metaClientCapabilities: map[string]any{},
		metaClientInfo:         map[string]any{"name": "mcp-agent", "version": "2.3.1"},
	}
	for k, v := range defaults {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	params["_meta"], msg["params"] = meta, params
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	ev["body"] = string(b)
	if _, ok := headers["content-length"]; ok {
		headers["content-length"] = strconv.Itoa(len(b))
	}

	out, err := json.Marshal(ev)
	require.NoError(t, err)
	return out
}

// invokeHTTP invokes with an API Gateway event and decodes the function's
// APIGatewayV2HTTPResponse, its body decoded when base64.
func invokeHTTP(t *testing.T, em *emulator, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	raw := em.invoke(t, event)
	var resp events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(raw, &resp), "an APIGatewayV2HTTPResponse: %s", raw)
	if resp.IsBase64Encoded {
		body, err := base64.StdEncoding.DecodeString(resp.Body)
		require.NoError(t, err)
		resp.Body, resp.IsBase64Encoded = string(body), false
	}
	return resp
}

// rpcResult returns the JSON-RPC result of a response, which is either a
// JSON body or one server-sent event carrying it.
func rpcResult(t *testing.T, resp events.APIGatewayV2HTTPResponse) json.RawMessage {
	t.Helper()
	body := resp.Body
	if strings.HasPrefix(header(resp, "Content-Type"), "text/event-stream") {
		var data []string
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				data = append(data, strings.TrimSpace(d))
			}
		}
		require.NotEmpty(t, data, "no data in event stream: %s", body)
		body = strings.Join(data, "\n")
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &msg), "a JSON-RPC message: %s", body)
	require.Equal(t, "2.0", msg.JSONRPC)
	require.Empty(t, msg.Error, "JSON-RPC error")
	require.NotEmpty(t, msg.Result, "JSON-RPC result: %s", body)
	return msg.Result
}

func header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) {
			return v
		}
	}
	for k, vs := range resp.MultiValueHeaders {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// assertStopsClean stops the emulator now and checks that it and every
// bootstrap it started are gone.
func assertStopsClean(t *testing.T, em *emulator) {
	t.Helper()
	pids := em.bootstraps()
	require.NotEmpty(t, pids, "the emulator started a bootstrap")
	require.NoError(t, em.stop())
	for _, pid := range append(pids, em.cmd.Process.Pid) {
		assert.False(t, processAlive(pid), "process %d still running after stop", pid)
	}
}
