package lambdahttp_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/mcpserver"
)

// In plain-HTTP mode (the devstack, or any long-running replica) every
// request has a deadline, LocalTimeout, standing in for Lambda's. A client
// that sends its headers and then trickles (or withholds) the body must not
// hold the request, its goroutine and its connection past that deadline:
// the server answers or closes the connection once the deadline is spent,
// as a Lambda invocation would end. Without it, one authenticated client
// can keep any number of requests open at no cost to itself (there is no
// connection cap and no read timeout), and shutdown waits on them.
func TestABodyThatNeverArrivesDoesNotHoldTheRequestPastItsDeadline(t *testing.T) {
	h, err := mcpserver.New(mcpserver.Config{Name: "test", Version: "0"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	const deadline = 500 * time.Millisecond
	go func() {
		done <- lambdahttp.ServeListener(ctx, ln, h, lambdahttp.Options{LocalTimeout: deadline,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-done
	})
	_, err = io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+ln.Addr().String()+"\r\n"+
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Content-Length: 4000\r\n\r\n{\"jsonrpc\":\"2.0\",")
	require.NoError(t, err)

	// Wait well past the request's deadline for any answer or a close.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(deadline+3*time.Second)))
	buf := make([]byte, 512)
	n, rerr := conn.Read(buf)
	var ne net.Error
	timedOut := errors.As(rerr, &ne) && ne.Timeout() || errors.Is(rerr, os.ErrDeadlineExceeded)
	assert.False(t, timedOut, "the request is still open %s after its %s deadline: the body read is not bounded", 3*time.Second, deadline)
	t.Logf("server answered %d bytes (%q), err %v", n, buf[:n], rerr)
}
