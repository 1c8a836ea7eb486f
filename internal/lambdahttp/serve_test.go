package lambdahttp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestUnderLambdaFollowsRuntimeAPIVariable(t *testing.T) {
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	assert.False(t, UnderLambda())
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
	assert.True(t, UnderLambda())
}

// startLocal serves h in plain-HTTP mode on a loopback port chosen at run
// time and stops it at cleanup.
func startLocal(t *testing.T, h http.Handler, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, h, opts) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String()
}

func TestPlainHTTPModeGivesRequestIDAndDeadline(t *testing.T) {
	base := startLocal(t, echoHandler(), Options{LocalTimeout: 25 * time.Second, Logger: discardLogger()})

	req, err := http.NewRequest(http.MethodPost, base+"/mcp?x=1", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	require.NoError(t, err)
	req.Header.Set("Mcp-Param-Order-Id", "O20260728001, O20260728002")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var seen echo
	require.NoError(t, json.Unmarshal(raw, &seen))

	assert.Equal(t, "/mcp", seen.Path)
	assert.Len(t, seen.RequestID, 36)
	assert.Equal(t, []string{seen.RequestID}, seen.Header["X-Request-Id"])
	assert.Empty(t, seen.GatewayID)
	assert.True(t, seen.HasDeadline)
	assert.Nil(t, seen.Claims, "claims never come from a plain HTTP request")
	assert.Equal(t, []string{"O20260728001, O20260728002"}, seen.Header["Mcp-Param-Order-Id"])
}

func TestPlainHTTPModeWithoutTimeoutHasNoDeadline(t *testing.T) {
	base := startLocal(t, echoHandler(), Options{Logger: discardLogger()})
	res, err := http.Get(base + "/.well-known/oauth-protected-resource")
	require.NoError(t, err)
	defer res.Body.Close()
	var seen echo
	require.NoError(t, json.NewDecoder(res.Body).Decode(&seen))
	assert.False(t, seen.HasDeadline)
}

func TestServeListenerStopsWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, echoHandler(), Options{Logger: discardLogger()}) }()
	cancel()
	require.NoError(t, <-done)
	_, err = net.Dial("tcp", ln.Addr().String())
	assert.Error(t, err, "the listener is closed")
}
