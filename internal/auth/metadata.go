package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownProtectedResource is the RFC 9728 well-known path prefix.
const WellKnownProtectedResource = "/.well-known/oauth-protected-resource"

// ProtectedResourceMetadataHandler serves the RFC 9728 document for resource
// (this server's resource URL, the same string as the token audience):
// resource, authorization_servers, bearer_methods_supported ["header"], and
// scopes_supported when scopes is non-empty. It is go-sdk's handler: GET only
// (405 otherwise), CORS open (the document is public by design), OPTIONS
// preflight answered. Mount it at every path [ProtectedResourceMetadataPaths]
// returns.
func ProtectedResourceMetadataHandler(resource string, authorizationServers []string, scopes []string) http.Handler {
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   slices.Clone(authorizationServers),
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        slices.Clone(scopes),
	}
	return sdkauth.ProtectedResourceMetadataHandler(md)
}

// ResourceMetadataURL is where RFC 9728 §3.1 puts the metadata for resource:
// the well-known path inserted between host and path, e.g.
// https://api.example/mcp -> https://api.example/.well-known/oauth-protected-resource/mcp.
// Use it for MiddlewareConfig.ResourceMetadataURL.
func ResourceMetadataURL(resource string) (string, error) {
	u, err := parseResource(resource)
	if err != nil {
		return "", err
	}
	meta := url.URL{Scheme: u.Scheme, Host: u.Host, Path: WellKnownProtectedResource + strings.TrimSuffix(u.Path, "/"), RawQuery: u.RawQuery}
	return meta.String(), nil
}

// ProtectedResourceMetadataPaths lists the paths to serve the metadata on:
// the path-suffixed form RFC 9728 prescribes for resource, and the bare
// well-known path older clients probe.
func ProtectedResourceMetadataPaths(resource string) ([]string, error) {
	u, err := parseResource(resource)
	if err != nil {
		return nil, err
	}
	paths := []string{WellKnownProtectedResource}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		paths = append(paths, WellKnownProtectedResource+p)
	}
	return paths, nil
}

func parseResource(resource string) (*url.URL, error) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("auth: resource %q is not an absolute http(s) URL without fragment", resource)
	}
	return u, nil
}
