package app

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// BenchmarkHandlerBuild prints the in-process part of an MCP cold start:
// the configuration read, Build, Handler (JWKS fetch included, from a local
// issuer) and the first tools/list, both families configured. Nothing in it
// reaches DynamoDB, so the engine's endpoint is never called.
//
// cpu-ms/op is the user+system CPU of the whole process (getrusage) per
// build, the figure that holds up on a shared machine; the local issuer
// serving the JWKS is in the same process and counted too.
//
//	env -u AWS_CA_BUNDLE GOGC=off go test -run '^$' -bench '^BenchmarkHandlerBuild$' ./internal/app/
func BenchmarkHandlerBuild(b *testing.B) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(b, err)
	jwks := httptest.NewServer(iss.Handler())
	b.Cleanup(jwks.Close)
	const resource = "https://mcp.example.com/mcp"
	token, err := iss.Mint(issuer.Claims{Subject: "u1", ClientID: "bench-client", Audience: resource, MerchantID: "M1"})
	require.NoError(b, err)
	env := startEnv(iss, jwks.URL+issuer.JWKSPath, resource, nil)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		cfg, err := FromEnv(env)
		require.NoError(b, err)
		a, err := Build(ctx, cfg, Options{Out: io.Discard})
		require.NoError(b, err)
		h, err := a.Handler(ctx)
		require.NoError(b, err)
		body := toolsList(b, h, token)
		require.Contains(b, body, `"create_deployment_ticket"`)
		require.NoError(b, a.Close(ctx))
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// startEnv is an MCP function's environment for a start that reaches no
// engine or provider (their endpoints are a closed local port), with the
// local issuer's JWKS, and extra set on top.
func startEnv(iss *issuer.Issuer, jwksURL, resource string, extra map[string]string) Lookup {
	env := map[string]string{
		"INTENTGATE_TABLE": "start", "INTENTGATE_DYNAMODB_ENDPOINT": "http://127.0.0.1:1", "AWS_REGION": "eu-west-1",
		"INTENTGATE_RISK_API_URL": "http://127.0.0.1:1", "INTENTGATE_RISK_API_KEY": "k",
		"INTENTGATE_RELEASE_API_URL": "http://127.0.0.1:1", "INTENTGATE_RELEASE_API_KEY": "k",
		"INTENTGATE_JWT_ISSUER": iss.URL(), "INTENTGATE_JWKS_URL": jwksURL,
		"INTENTGATE_RESOURCE_URL": resource,
	}
	maps.Copy(env, extra)
	return mapLookup(env)
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// toolsList serves one tools/list to h as the bearer of token and returns
// the response body.
func toolsList(tb testing.TB, h http.Handler, token string) string {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(tb, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}
