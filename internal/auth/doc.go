// Package auth establishes who is calling before MCP is reached.
//
// Two principals come out of a verified bearer token (docs/design.md,
// Identity and the gateway authorizer):
// the client principal (which MCP client: client_id, else azp) for ingress,
// quotas and audit, and the end-user principal (sub plus the merchant/tenant
// claim) for object-level authorization. Both come from trusted context only,
// never from tool arguments.
//
// A request is authenticated in one of two ways:
//   - the server verifies the bearer itself ([Verifier]: JWKS, pinned
//     asymmetric algorithms, issuer, audience = this server's resource URL,
//     exp/nbf with skew), used in the devstack and behind any front that does
//     not verify tokens;
//   - behind API Gateway's JWT authorizer, the claims the authorizer already
//     verified are taken from the request context ([WithGatewayClaims]), and
//     only when [MiddlewareConfig].TrustGatewayAuthorizer says so.
//
// Failures answer HTTP 401 with a WWW-Authenticate challenge pointing at the
// RFC 9728 protected-resource metadata ([ProtectedResourceMetadataHandler]).
// The caller's token never travels further than this package: the middleware
// removes the Authorization header from the request it hands on.
package auth
