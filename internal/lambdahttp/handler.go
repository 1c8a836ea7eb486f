package lambdahttp

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/intentgate/intentgate/internal/requestid"
)

// LambdaHandler is the function shape lambda.Start accepts for HTTP API
// (payload format 2.0) integrations.
type LambdaHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Handler adapts h to API Gateway HTTP API events. The request's context is
// ctx (carrying the Lambda deadline) plus the request ids and, when
// configured, the JWT authorizer's claims. It never returns an error: a
// malformed event is answered 400 and a handler panic 500, so API Gateway
// always gets an HTTP answer and the Lambda instance survives.
func Handler(h http.Handler, opts Options) LambdaHandler {
	log := opts.logger()
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ids := invocationIDs(ctx, ev)
		ctx = requestid.With(ctx, ids)
		if claims := jwtClaims(ev); claims != nil && opts.WithGatewayClaims != nil {
			ctx = opts.WithGatewayClaims(ctx, claims)
		}

		req, err := newRequest(ctx, ev)
		if err != nil {
			log.WarnContext(ctx, "rejecting malformed API Gateway event",
				"request_id", ids.Request, "gateway_request_id", ids.Gateway, "error", err)
			return errorResponse(http.StatusBadRequest), nil
		}
		if req.Header.Get(requestid.Header) == "" {
			req.Header.Set(requestid.Header, ids.Request)
		}

		w := newResponseWriter()
		if p := serveRecovering(h, w, req); p != nil && p.value != http.ErrAbortHandler {
			log.ErrorContext(ctx, "handler panicked", "request_id", ids.Request,
				"panic", fmt.Sprint(p.value), "stack", string(p.stack))
		}
		return w.toEvent(req.Method), nil
	}
}

// invocationIDs picks the request ids: the Lambda invocation id first (it
// tags the function's own log lines and trace), API Gateway's id second, and
// a fresh id when neither exists (direct invokes in tests).
func invocationIDs(ctx context.Context, ev events.APIGatewayV2HTTPRequest) requestid.IDs {
	ids := requestid.IDs{Gateway: ev.RequestContext.RequestID}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		ids.Request = lc.AwsRequestID
	}
	if ids.Request == "" {
		ids.Request = ids.Gateway
	}
	if ids.Request == "" {
		ids.Request = requestid.New()
	}
	return ids
}

type handlerPanic struct {
	value any
	stack []byte
}

// serveRecovering runs h and turns a panic into a 500 with nothing of the
// partial response kept, as the net/http server keeps serving after one.
// It returns the panic, or nil.
func serveRecovering(h http.Handler, w *responseWriter, r *http.Request) (caught *handlerPanic) {
	defer func() {
		if p := recover(); p != nil {
			caught = &handlerPanic{value: p, stack: debug.Stack()}
			w.reset()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(http.StatusText(http.StatusInternalServerError) + "\n"))
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

func errorResponse(status int) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		Cookies:    []string{},
		Body:       http.StatusText(status) + "\n",
	}
}
