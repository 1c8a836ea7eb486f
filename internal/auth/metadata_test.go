package auth_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

func TestProtectedResourceMetadataServesRFC9728Document(t *testing.T) {
	tests := []struct {
		name    string
		servers []string
		scopes  []string
		want    string
	}{
		{
			name:    "with scopes",
			servers: []string{"https://issuer.example.test"},
			scopes:  []string{"mcp:tools"},
			want:    `{"resource":"https://mcp.example.test/mcp","authorization_servers":["https://issuer.example.test"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`,
		},
		{
			name:    "without scopes",
			servers: []string{"https://issuer.example.test"},
			want:    `{"resource":"https://mcp.example.test/mcp","authorization_servers":["https://issuer.example.test"],"bearer_methods_supported":["header"]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := auth.ProtectedResourceMetadataHandler(resource, tc.servers, tc.scopes)
			paths, err := auth.ProtectedResourceMetadataPaths(resource)
			require.NoError(t, err)
			mux := http.NewServeMux()
			for _, p := range paths {
				mux.Handle(p, h)
			}
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)

			for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
				res, err := srv.Client().Get(srv.URL + p)
				require.NoError(t, err)
				body, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				require.NoError(t, res.Body.Close())
				assert.Equal(t, http.StatusOK, res.StatusCode, p)
				assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
				assert.JSONEq(t, tc.want, string(body), p)
			}

			res, err := srv.Client().Post(srv.URL+paths[0], "application/json", strings.NewReader("{}"))
			require.NoError(t, err)
			require.NoError(t, res.Body.Close())
			assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
		})
	}
}

func TestResourceMetadataURLInsertsWellKnownBeforePath(t *testing.T) {
	tests := []struct{ resource, want string }{
		{"https://mcp.example.test/mcp", "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"},
		{"https://mcp.example.test/mcp/", "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"},
		{"https://mcp.example.test", "https://mcp.example.test/.well-known/oauth-protected-resource"},
		{"http://127.0.0.1:8080/prod/mcp", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/prod/mcp"},
	}
	for _, tc := range tests {
		got, err := auth.ResourceMetadataURL(tc.resource)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
	for _, bad := range []string{"", "/mcp", "ftp://x/mcp", "https://x/mcp#frag"} {
		_, err := auth.ResourceMetadataURL(bad)
		assert.Error(t, err, bad)
	}
	paths, err := auth.ProtectedResourceMetadataPaths("https://mcp.example.test")
	require.NoError(t, err)
	assert.Equal(t, []string{"/.well-known/oauth-protected-resource"}, paths)
}
