package auth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

// bearerTransport adds a fixed Authorization header, as an MCP client would.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

type whoamiOut struct {
	ClientID      string `json:"client_id"`
	UserID        string `json:"user_id"`
	Authenticated bool   `json:"authenticated"`
	TokenVisible  bool   `json:"token_visible"`
}

// Pins the contract the MCP layer relies on: with the middleware in front of
// go-sdk's stateless streamable handler, the Subject reaches tool handlers
// through ctx, and the caller's token does not (Extra.Header).
func TestSubjectReachesMCPToolHandlersInStatelessMode(t *testing.T) {
	iss := startIssuer(t)
	v := newVerifier(t, iss)

	server := mcp.NewServer(&mcp.Implementation{Name: "authtest", Version: "0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoamiOut, error) {
		s, ok := auth.SubjectFrom(ctx)
		visible := req.Extra != nil && req.Extra.Header.Get("Authorization") != ""
		return nil, whoamiOut{ClientID: s.ClientID, UserID: s.UserID, Authenticated: ok, TokenVisible: visible}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(auth.Middleware(auth.MiddlewareConfig{Verifier: v, ResourceMetadataURL: metadataURL})(h))
	t.Cleanup(srv.Close)

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             srv.URL,
		HTTPClient:           &http.Client{Transport: bearerTransport{token: mint(t, iss, goodClaims())}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	out, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok, "%T", res.StructuredContent)
	assert.Equal(t, map[string]any{"client_id": "agent-client", "user_id": "user-42", "authenticated": true, "token_visible": false}, out)

	// And without a token the MCP layer is never reached.
	bare, err := http.Post(srv.URL, "application/json", nil)
	require.NoError(t, err)
	require.NoError(t, bare.Body.Close())
	assert.Equal(t, http.StatusUnauthorized, bare.StatusCode)
}
