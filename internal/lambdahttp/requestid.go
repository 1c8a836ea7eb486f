package lambdahttp

import "context"

// RequestIDHeader is set on the request from the invocation's id when the
// caller did not send one.
const RequestIDHeader = "X-Request-Id"

type requestIDsKey struct{}

type requestIDs struct {
	request string
	gateway string
}

// WithRequestID returns ctx carrying id as the request id (and no gateway id).
// Tests and other fronts use it; the adapter sets ids itself.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDsKey{}, requestIDs{request: id})
}

func withRequestIDs(ctx context.Context, ids requestIDs) context.Context {
	return context.WithValue(ctx, requestIDsKey{}, ids)
}

// RequestIDFrom returns the server-side id of the request: the Lambda
// invocation's AwsRequestID under Lambda (falling back to API Gateway's
// requestId), or a minted id in plain-HTTP mode. It never returns a value
// the caller chose, so audit records can trust it. Empty when absent.
func RequestIDFrom(ctx context.Context) string {
	ids, _ := ctx.Value(requestIDsKey{}).(requestIDs)
	return ids.request
}

// GatewayRequestIDFrom returns API Gateway's requestContext.requestId (the
// value API Gateway also returns as the apigw-requestid response header and
// writes to its access log). Empty outside API Gateway.
func GatewayRequestIDFrom(ctx context.Context) string {
	ids, _ := ctx.Value(requestIDsKey{}).(requestIDs)
	return ids.gateway
}
