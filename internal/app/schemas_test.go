package app

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/mcpserver"
)

// The MCP server resolves a tool's schemas at its first call, not at start
// (mcpserver.New): every tool this application serves, both families
// configured, must resolve, or its first call would be refused.
func TestEveryServedToolsSchemasResolve(t *testing.T) {
	cfg := engineConfig(t, map[string]string{
		"INTENTGATE_RISK_API_KEY": "k", "INTENTGATE_RELEASE_API_URL": "http://127.0.0.1:1", "INTENTGATE_RELEASE_API_KEY": "k",
	})
	a, err := Build(context.Background(), cfg, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	gw, err := gateway.New(gateway.Config{Executor: a.Executor, Writes: a.writes, Gate: a.Gate, Auditor: a.Auditor, Metrics: a.Metrics, Logger: a.Logger})
	require.NoError(t, err)
	served := gw.Tools()
	require.Len(t, served, 6, "request_risk_review, get_risk_review_status, create_deployment_ticket, approve_rollout, get_operation, resolve_operation")
	require.NoError(t, mcpserver.ResolveSchemas(served...))
}
