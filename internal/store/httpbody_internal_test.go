package store

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closedWriterToBody mimics smithy-go's request body after the SDK closed
// it: WriteTo reports io.EOF as an error, Read reports a plain end.
type closedWriterToBody struct{}

func (closedWriterToBody) Read([]byte) (int, error)         { return 0, io.EOF }
func (closedWriterToBody) Close() error                     { return nil }
func (closedWriterToBody) WriteTo(io.Writer) (int64, error) { return 0, io.EOF }

type captureClient struct{ body io.ReadCloser }

func (c *captureClient) Do(req *http.Request) (*http.Response, error) {
	c.body = req.Body
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func TestClosedBodySafeClientHidesWriteTo(t *testing.T) {
	_, err := io.Copy(io.Discard, closedWriterToBody{})
	require.ErrorIs(t, err, io.EOF, "precondition: the unwrapped body breaks io.Copy")

	inner := &captureClient{}
	c := ClosedBodySafeHTTPClient(inner)
	assert.Equal(t, c, ClosedBodySafeHTTPClient(c), "wrapping twice is a no-op")
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/", closedWriterToBody{})
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	_, isWriterTo := inner.body.(io.WriterTo)
	assert.False(t, isWriterTo)
	_, err = io.Copy(io.Discard, inner.body)
	assert.NoError(t, err, "the final discard copy of net/http sees a plain end")
}

func TestClosedBodySafeClientKeepsBodyContent(t *testing.T) {
	inner := &captureClient{}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/", bytes.NewReader([]byte(`{"a":1}`)))
	require.NoError(t, err)
	resp, err := ClosedBodySafeHTTPClient(inner).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	got, err := io.ReadAll(inner.body)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got))
}

func TestNewClientUsesTheClosedBodySafeHTTPClient(t *testing.T) {
	c, err := NewClient(context.Background(), ClientConfig{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	assert.IsType(t, closedBodySafeClient{}, c.Options().HTTPClient)
}
