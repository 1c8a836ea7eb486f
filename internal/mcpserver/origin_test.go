package mcpserver

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Streamable HTTP (2025-11-25 and 2026-07-28, Security): "Servers MUST
// validate the Origin header on all incoming connections to prevent DNS
// rebinding attacks. If the Origin header is present and invalid, servers
// MUST respond with HTTP 403 Forbidden. The HTTP response body MAY comprise
// a JSON-RPC error response that has no id." The SDK checks only the Host
// of a loopback listener; a foreign Origin naming this server's own Host
// went through.
func TestAPostFromAForeignOriginIsForbidden(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	ctx := testContext(t)
	for _, body := range []string{
		"", // a well-formed request
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, // one the boundary answers itself
		`{not json`,
	} {
		h, req := newProtocolRequest(1, "tools/list", "", nil)
		if body != "" {
			req = body
		}
		h.Set("Origin", "https://evil.example")
		resp := post(t, ctx, srv.URL, h, req)
		require.Equal(t, http.StatusForbidden, resp.status, "body %s: %s", req, resp.body)
		msg := decodeMessages(t, resp)[0]
		require.NotNil(t, msg.Error, "a JSON-RPC error: %s", resp.body)
		assert.Nil(t, msg.ID, "an error with no id")
	}

	// This server's own origin, and no Origin at all (every non-browser
	// client), are served.
	for _, origin := range []string{srv.URL, ""} {
		h, req := newProtocolRequest(1, "tools/list", "", nil)
		if origin != "" {
			h.Set("Origin", origin)
		}
		resp := post(t, ctx, srv.URL, h, req)
		assert.Equal(t, http.StatusOK, resp.status, "Origin %q: %s", origin, resp.body)
	}
}
