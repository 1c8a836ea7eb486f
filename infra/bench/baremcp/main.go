// Command baremcp is the cold-start baseline of `make bench-coldstart`: the
// smallest honest MCP Lambda built on the same go-sdk and aws-lambda-go,
// a stateless Streamable HTTP server with one tool and a minimal API
// Gateway HTTP API (payload 2.0) adapter. No auth, no AWS clients, no
// storage: what any go-sdk MCP function pays before its own work. It is
// never deployed.
package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Text string `json:"text" jsonschema:"text to echo"`
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "baremcp", Version: "0.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echo the text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	lambda.Start(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		body := ev.Body
		if ev.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
			}
			body = string(b)
		}
		req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, "https://"+ev.RequestContext.DomainName+ev.RawPath, strings.NewReader(body))
		if err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
		}
		for k, v := range ev.Headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		headers := map[string]string{}
		for k := range rec.Header() {
			headers[k] = rec.Header().Get(k)
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: rec.Code, Headers: headers, Body: rec.Body.String()}, nil
	})
}
