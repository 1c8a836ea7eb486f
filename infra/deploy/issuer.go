package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/auth"
)

// maxIssuerDocument bounds what the issuer check reads of a discovery
// document or key set.
const maxIssuerDocument = 1 << 20

// fetch is runner.fetch outside tests: a GET with a short timeout. err is
// for a request that got no answer; an answer of any status is returned.
func (execRunner) fetch(ctx context.Context, url string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerDocument))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// checkGatewayIssuer runs before a deploy with GatewayJwtAuthorizer=true.
// API Gateway's JWT authorizer finds the issuer's keys through its OpenID
// Connect discovery document ({issuer}/.well-known/openid-configuration,
// jwks_uri) and verifies RSA signatures only: with an issuer that has no
// such document, or no RSA signing key, the deployed API would refuse
// every request. What the issuer answers decides; an issuer this machine
// can not reach is reported and not held against the deploy (API Gateway
// reaches it from elsewhere).
func checkGatewayIssuer(ctx context.Context, r runner, out io.Writer, issuer, jwksURL string) error {
	const why = "API Gateway's JWT authorizer (GatewayJwtAuthorizer=true) "
	discovery := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	status, body, err := r.fetch(ctx, discovery)
	if err != nil {
		fmt.Fprintf(out, "Could not check the issuer from here (%v). %sreads %s and needs an RSA signing key in its jwks_uri.\n", err, why, discovery)
		return nil
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d: %sfinds the issuer's keys through this OpenID Connect discovery document; use an issuer that publishes it, or GatewayJwtAuthorizer=false", discovery, status, why)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.JWKSURI == "" {
		return fmt.Errorf("%s is not a discovery document with a jwks_uri: %sneeds one; use GatewayJwtAuthorizer=false", discovery, why)
	}
	if doc.Issuer != issuer {
		fmt.Fprintf(out, "Note: %s names the issuer %q; TokenIssuer is %q, and tokens' iss must equal TokenIssuer exactly.\n", discovery, doc.Issuer, issuer)
	}
	if doc.JWKSURI != jwksURL {
		fmt.Fprintf(out, "Note: the authorizer takes keys from %s, the functions from JwksUrl %s: they should be one key set.\n", doc.JWKSURI, jwksURL)
	}
	status, body, err = r.fetch(ctx, doc.JWKSURI)
	if err != nil {
		fmt.Fprintf(out, "Could not check the issuer's keys from here (%v). %sneeds an RSA signing key in %s.\n", err, why, doc.JWKSURI)
		return nil
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d: %sreads the issuer's keys there", doc.JWKSURI, status, why)
	}
	rsa, err := auth.KeySetHasSigningKeyType(body, "RSA")
	if err != nil {
		return fmt.Errorf("%s: %w; %sreads the issuer's keys there", doc.JWKSURI, err, why)
	}
	if !rsa {
		return fmt.Errorf("%s has no RSA signing key: %sverifies RSA signatures only (an ES256 issuer works with GatewayJwtAuthorizer=false, where the functions verify tokens)", doc.JWKSURI, why)
	}
	return nil
}
