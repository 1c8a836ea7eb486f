package issuer

import (
	"encoding/json"
	"net/http"
)

// JWKSHandler serves the public JWKS (mounted at JWKSPath by [Issuer.Handler]).
func (i *Issuer) JWKSHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := i.PublicJWKS()
		// Short max-age: rotation in the devstack should show up quickly.
		writeJSON(w, set, "public, max-age=60")
	})
}

// authServerMetadata is the minimal RFC 8414 / OIDC discovery document. The
// issuer has no authorization or token endpoint, hence no response types.
type authServerMetadata struct {
	Issuer                 string   `json:"issuer"`
	JWKSURI                string   `json:"jwks_uri"`
	ResponseTypesSupported []string `json:"response_types_supported"`
}

// MetadataHandler serves the discovery document (at OpenIDConfigPath and
// AuthServerMetadataPath in [Issuer.Handler]).
func (i *Issuer) MetadataHandler() http.Handler {
	md := authServerMetadata{
		Issuer:                 i.url,
		JWKSURI:                i.JWKSURL(),
		ResponseTypesSupported: []string{},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, md, "public, max-age=300")
	})
}

// Handler serves the JWKS and both discovery documents (GET/HEAD only) at
// their well-known paths. If the issuer URL has a path, mount it under that
// path with http.StripPrefix.
func (i *Issuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+JWKSPath, i.JWKSHandler())
	md := i.MetadataHandler()
	mux.Handle("GET "+OpenIDConfigPath, md)
	mux.Handle("GET "+AuthServerMetadataPath, md)
	return mux
}

func writeJSON(w http.ResponseWriter, v any, cacheControl string) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", cacheControl)
	_, _ = w.Write(b)
}
