package rie

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/deployhook"
)

// The PreTraffic hook's probes are events the functions, as built, answer
// as the hook expects: a version that starts passes.
func TestPreTrafficProbesPassOnBothFunctionsUnderTheEmulator(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	for _, c := range []struct {
		probe     deployhook.Probe
		bootstrap string
		name      string
	}{
		{deployhook.ProbeMCP, b.mcp, "intentgate-mcp"},
		{deployhook.ProbeReconciler, b.reconciler, "intentgate-reconciler"},
	} {
		t.Run(string(c.probe), func(t *testing.T) {
			em := startEmulator(t, b.emulator, c.bootstrap, sys.functionEnv(c.name))
			payload, err := c.probe.Event()
			require.NoError(t, err)
			result, functionError := em.invokeRaw(t, payload)
			require.Empty(t, functionError, "%s", result)
			assert.NoError(t, c.probe.Judge(result))
		})
	}
}

// A version that cannot start (here: its issuer's keys cannot be fetched)
// fails the MCP probe, so CodeDeploy stops the deployment before any
// caller meets it.
func TestPreTrafficProbeFailsAnMCPVersionThatCannotStart(t *testing.T) {
	t.Parallel()
	b := needBinaries(t)
	sys := newSystem(t)
	env := sys.functionEnv("intentgate-mcp")
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	env["INTENTGATE_JWKS_URL"] = "http://" + closed + "/.well-known/jwks.json"
	em := startEmulator(t, b.emulator, b.mcp, env)
	payload, err := deployhook.ProbeMCP.Event()
	require.NoError(t, err)
	result, functionError := em.invokeRaw(t, payload)
	if functionError == "" {
		assert.Error(t, deployhook.ProbeMCP.Judge(result), "a version that cannot fetch its keys must not pass: %s", result)
	}
}
