package mcpserver

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// "Servers MUST validate the Origin header on all incoming connections ...
// If the Origin header is present and invalid, servers MUST respond with
// HTTP 403 Forbidden" (Streamable HTTP, Security): all connections, the
// GET that opens a stream (and a preflight) included, not only POSTs.
// net/http's CrossOriginProtection lets GET, HEAD and OPTIONS through.
func TestEveryMethodFromAForeignOriginIsForbidden(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete} {
		req, err := http.NewRequestWithContext(testContext(t), method, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, method)

		// The server's own origin is served as before.
		req, err = http.NewRequestWithContext(testContext(t), method, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Accept", "text/event-stream")
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.NotEqual(t, http.StatusForbidden, resp.StatusCode, "%s from the server's own origin", method)
	}
}
