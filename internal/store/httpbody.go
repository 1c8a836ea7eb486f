package store

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Against a fast loopback engine about one request in 1,500 failed with
// "deserialization failed ... use of closed network connection" (measured
// against moto, aws-sdk-go-v2 dynamodb v1.74.0, smithy-go v1.28.9, Go 1.26).
// The race: smithy-go closes its request body as soon as the response
// headers arrive; net/http's write loop may not yet have done its final
// io.Copy(io.Discard, body), and smithy's body WriteTo returns io.EOF once
// closed, which io.Copy reports as an error; net/http then treats it as a
// write failure and closes the connection under the response being read.
// The SDK retries that error (net.ErrClosed is retryable), so a conditional
// write or CreateTable that already took effect comes back refused.
// Hiding WriteTo makes io.Copy use Read, which reports a plain EOF.
// Real DynamoDB's round trip makes the window tiny, but the race is the same.

// ClosedBodySafeHTTPClient wraps an SDK HTTP client so request bodies expose
// only Read and Close (see the note above).
func ClosedBodySafeHTTPClient(next dynamodb.HTTPClient) dynamodb.HTTPClient {
	if _, ok := next.(closedBodySafeClient); ok {
		return next
	}
	return closedBodySafeClient{next: next}
}

type closedBodySafeClient struct{ next dynamodb.HTTPClient }

func (c closedBodySafeClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readCloserOnly{req.Body}
	}
	return c.next.Do(req)
}

// readCloserOnly hides every method of the body but Read and Close.
type readCloserOnly struct{ io.ReadCloser }
