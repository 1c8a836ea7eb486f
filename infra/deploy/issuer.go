package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/auth"
)

// maxIssuerDocument bounds what the issuer check reads of a discovery
// document or key set.
const maxIssuerDocument = 1 << 20

// issuerClient reads the issuer's documents: a short timeout, the proxy
// settings of the environment, and no redirects followed (whether API
// Gateway follows them is not documented: a redirect is reported).
var issuerClient = &http.Client{
	Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// fetch is runner.fetch outside tests: one GET. err is for a request that
// got no answer; an answer of any status is returned, its body up to
// maxIssuerDocument (one byte more tells it was longer).
func (execRunner) fetch(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := issuerClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerDocument+1))
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
	body, ok, err := readIssuerDocument(ctx, r, out, discovery)
	if err != nil {
		return fmt.Errorf("%w: %sfinds the issuer's keys through this OpenID Connect discovery document; use an issuer that publishes it, or GatewayJwtAuthorizer=false", err, why)
	}
	if !ok {
		fmt.Fprintf(out, "%sreads %s and needs an RSA signing key in its jwks_uri.\n", why, discovery)
		return nil
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.JWKSURI == "" {
		return fmt.Errorf("%s is not a discovery document with a jwks_uri: %sneeds one; use GatewayJwtAuthorizer=false", discovery, why)
	}
	if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s names jwks_uri %q, not an https URL: %sfetches the keys there", discovery, doc.JWKSURI, why)
	}
	if doc.Issuer != issuer {
		fmt.Fprintf(out, "Note: %s names the issuer %q; TokenIssuer is %q, and tokens' iss must equal TokenIssuer exactly.\n", discovery, doc.Issuer, issuer)
	}
	if doc.JWKSURI != jwksURL {
		fmt.Fprintf(out, "Note: the authorizer takes keys from %s, the functions from JwksUrl %s: they should be one key set.\n", doc.JWKSURI, jwksURL)
	}
	body, ok, err = readIssuerDocument(ctx, r, out, doc.JWKSURI)
	if err != nil {
		return fmt.Errorf("%w: %sreads the issuer's keys there", err, why)
	}
	if !ok {
		fmt.Fprintf(out, "%sneeds an RSA signing key in %s.\n", why, doc.JWKSURI)
		return nil
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

// checkFunctionKeys runs before every deploy: the functions fetch JwksUrl
// at each cold start and do not start without a signing key they can read
// (RSA or EC; in gateway mode RSA, what the authorizer verifies), so a URL
// the issuer says is not there, or that holds no such key, would deploy
// functions that can not start. As for the gateway's check, an issuer this
// machine can not reach is reported only.
func checkFunctionKeys(ctx context.Context, r runner, out io.Writer, jwksURL string, gateway bool) error {
	const why = "the functions fetch their keys from JwksUrl at every cold start (make deploy ARGS=-guided to change it)"
	body, ok, err := readIssuerDocument(ctx, r, out, jwksURL)
	if err != nil {
		return fmt.Errorf("%w: %s", err, why)
	}
	if !ok {
		fmt.Fprintf(out, "JwksUrl %s must hold a signing key (RSA or EC) when the functions start.\n", jwksURL)
		return nil
	}
	types := []string{"RSA", "EC"}
	if gateway {
		types = []string{"RSA"}
	}
	for _, kty := range types {
		has, err := auth.KeySetHasSigningKeyType(body, kty)
		if err != nil {
			return fmt.Errorf("JwksUrl %s: %w; %s", jwksURL, err, why)
		}
		if has {
			return nil
		}
	}
	return fmt.Errorf("JwksUrl %s holds no signing key the functions can read (%s, use sig): %s and would not start", jwksURL, strings.Join(types, " or "), why)
}

// readIssuerDocument GETs one of the issuer's documents. ok is false when
// what came back says nothing about the issuer (no answer, a redirect, a
// refusal of this client or a server error: reported, not held against the
// deploy); err when the issuer says the document is not there (404, 410)
// or it is too large to be one.
func readIssuerDocument(ctx context.Context, r runner, out io.Writer, url string) (body []byte, ok bool, err error) {
	status, body, err := r.fetch(ctx, url)
	switch {
	case err != nil:
		fmt.Fprintf(out, "Could not check the issuer from here: %v.\n", err)
		return nil, false, nil
	case status == http.StatusNotFound || status == http.StatusGone:
		return nil, false, fmt.Errorf("%s answered HTTP %d", url, status)
	case status != http.StatusOK:
		fmt.Fprintf(out, "Could not check the issuer from here: %s answered HTTP %d.\n", url, status)
		return nil, false, nil
	case len(body) > maxIssuerDocument:
		return nil, false, fmt.Errorf("%s is larger than %d bytes", url, maxIssuerDocument)
	}
	return body, true, nil
}
