// Package requestid carries the server-side ids of one request through its
// context. The front that receives the request sets them once (the Lambda
// adapter from the invocation and API Gateway's event, the plain-HTTP
// server by minting one); everything after it (the MCP boundary, audit
// records, log lines) reads them from here, so one request has one id
// everywhere.
package requestid

import (
	"context"

	"github.com/google/uuid"
)

// Header is the response (and, when the caller sent none, request) header
// that carries the request id.
const Header = "X-Request-Id"

// IDs are the ids of one request.
type IDs struct {
	// Request is the server-side id: the Lambda invocation's AwsRequestID
	// under Lambda, else a minted one. Never a value the caller chose, so
	// audit records can trust it.
	Request string
	// Gateway is API Gateway's requestContext.requestId (its access log's
	// requestId and the apigw-requestid response header). Empty outside
	// API Gateway.
	Gateway string
}

type key struct{}

// With returns ctx carrying ids.
func With(ctx context.Context, ids IDs) context.Context {
	return context.WithValue(ctx, key{}, ids)
}

// From returns the ids ctx carries (zero when none).
func From(ctx context.Context) IDs {
	ids, _ := ctx.Value(key{}).(IDs)
	return ids
}

// Ensure returns ctx with a request id: the one it carries, else a new one.
func Ensure(ctx context.Context) (context.Context, IDs) {
	ids := From(ctx)
	if ids.Request != "" {
		return ctx, ids
	}
	ids.Request = New()
	return With(ctx, ids), ids
}

// New mints a request id.
func New() string { return uuid.NewString() }
