package obs

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// InstrumentAWS adds the tracer to an AWS SDK v2 middleware stack (pass
// &aws.Config.APIOptions): every call made with a traced context is a
// subsegment named after the service ("DynamoDB", "SSM"), namespace aws,
// with the operation, region, request id and HTTP status, and the request
// carries X-Amzn-Trace-Id. It is what aws-xray-sdk-go's
// instrumentation/awsv2 does, on this package's spans. Disabled, it adds
// nothing.
func (t *Tracer) InstrumentAWS(apiOptions *[]func(*middleware.Stack) error) {
	if !t.Enabled() {
		return
	}
	*apiOptions = append(*apiOptions, t.awsCallSpan, awsWireSpan)
}

type awsSpanKey struct{}

// awsCallSpan opens the subsegment after the SDK's own initialize steps
// (so the operation name is known) and ends it with the call's error,
// after every retry.
func (t *Tracer) awsCallSpan(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("IntentgateTraceCall",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			ctx, s := t.startSubsegment(ctx, awsmiddleware.GetServiceID(ctx))
			if s == nil {
				return next.HandleInitialize(ctx, in)
			}
			s.update(func(d *segmentDoc) {
				d.Namespace = "aws"
				d.AWS = map[string]string{"operation": awsmiddleware.GetOperationName(ctx), "region": awsmiddleware.GetRegion(ctx)}
			})
			out, md, err := next.HandleInitialize(context.WithValue(ctx, awsSpanKey{}, s), in)
			if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok {
				s.update(func(d *segmentDoc) { d.AWS["request_id"] = id })
			}
			s.finish(err)
			return out, md, err
		}), middleware.After)
}

// awsWireSpan runs per attempt, just before the response is decoded:
// it stamps the trace header on the request and records the status.
func awsWireSpan(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("IntentgateTraceWire",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			s, _ := ctx.Value(awsSpanKey{}).(*span)
			if s == nil {
				return next.HandleDeserialize(ctx, in)
			}
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				req.Header.Set(TraceHeader, s.downstreamHeader())
			}
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
				s.httpStatus(resp.StatusCode, resp.ContentLength)
			}
			return out, md, err
		}), middleware.Before)
}
