package app

import (
	"context"
	"io"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// maxStartHeap bounds what a cold start leaves on the heap (this test
// measures about 2.7 MiB, its issuer included): functions/mcp keeps the
// collector off after the start under a memory limit of at least four
// times this, and reads no heap figure at run time to decide (reading one
// cost the cold start 0.1-0.3 ms).
const maxStartHeap = 16 << 20

// Everything the MCP function's start allocates, with the collector off as
// it is then: configuration, Build, Handler (a local JWKS) and the first
// tools/list.
func TestTheStartLeavesFarLessHeapThanTheCollectorPolicyAssumes(t *testing.T) {
	iss, err := issuer.New("http://issuer.invalid")
	require.NoError(t, err)
	jwks := httptest.NewServer(iss.Handler())
	t.Cleanup(jwks.Close)
	const resource = "https://mcp.example.com/mcp"
	token, err := iss.Mint(issuer.Claims{Subject: "u1", ClientID: "heap-client", Audience: resource, MerchantID: "M1"})
	require.NoError(t, err)
	env := startEnv(iss, jwks.URL+issuer.JWKSPath, resource, map[string]string{"INTENTGATE_TASK_ID_KEY": "0123456789abcdef0123456789abcdef"})
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	ctx := context.Background()
	cfg, err := FromEnv(env)
	require.NoError(t, err)
	a, err := Build(ctx, cfg, Options{Out: io.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(ctx) })
	h, err := a.Handler(ctx)
	require.NoError(t, err)
	require.Contains(t, toolsList(t, h, token), `"create_deployment_ticket"`)

	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("the start allocated %.1f MiB", float64(allocated)/(1<<20))
	assert.Less(t, allocated, uint64(maxStartHeap))
}
