//go:build linux

package rie

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/apigwfront"
	"github.com/intentgate/intentgate/internal/auth/issuer"
)

// conformanceScenarios are the MCP conformance suite's server scenarios
// that apply to any tools-only server (no fixture tools of the suite).
var conformanceScenarios = []string{
	"server-stateless", "tools-list", "server-sse-multiple-streams", "resources-list", "prompts-list",
	"sep-2164-resource-not-found", "dns-rebinding-protection", "caching", "http-header-validation",
}

// conformanceProtocol is the protocol the suite speaks where a scenario
// supports more than one.
const conformanceProtocol = "2026-07-28"

// TestConformanceSuiteScoresTheSameOverHTTPAndThroughTheAdapter runs the
// MCP conformance suite against the MCP function twice: served over plain
// HTTP by the same app the function builds, and as the Lambda binary under
// the Runtime Interface Emulator behind apigwfront, which turns each HTTP
// request into an API Gateway payload 2.0 event as API Gateway would. The
// Lambda adapter must not change a single check's outcome. It prints both
// scores side by side. `make conformance` runs it (it needs the suite that
// `make client-deps` installs into test/clients).
func TestConformanceSuiteScoresTheSameOverHTTPAndThroughTheAdapter(t *testing.T) {
	if os.Getenv("INTENTGATE_CONFORMANCE") == "" {
		t.Skip("SKIP: run by `make conformance` (INTENTGATE_CONFORMANCE=1): the MCP conformance suite takes minutes")
	}
	clients, err := filepath.Abs(filepath.Join("..", "clients"))
	require.NoError(t, err)
	node := filepath.Join(clients, "node_modules", ".bin", "node")
	suite := filepath.Join(clients, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		_, err := os.Stat(f)
		require.NoError(t, err, "the conformance suite is not installed: run `make client-deps`")
	}

	b := needBinaries(t)
	sys := newSystem(t)
	em := startEmulator(t, b.emulator, b.mcp, sys.functionEnv("intentgate-mcp"))
	token, err := sys.issuer.Mint(issuer.Claims{
		Subject: "alice", ClientID: "conformance-suite", MerchantID: "M1", Audience: resourceURL, TTL: time.Hour,
	})
	require.NoError(t, err)
	h, err := sys.app.Handler(context.Background())
	require.NoError(t, err)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	// The front answers to the names the suite calls it by, as API Gateway
	// answers to its own domains only.
	adapter := httptest.NewServer(apigwfront.New(em.invokeURL, "", "127.0.0.1", "localhost"))
	t.Cleanup(adapter.Close)

	paths := []struct{ name, url string }{
		{"plain HTTP", withToken(t, plain.URL, token) + "/mcp"},
		{"Lambda adapter", withToken(t, adapter.URL, token) + "/mcp"},
	}
	scores := make([][]score, len(paths))
	for i, p := range paths {
		for _, scenario := range conformanceScenarios {
			scores[i] = append(scores[i], runConformance(t, node, suite, p.url, scenario))
		}
	}

	var report strings.Builder
	fmt.Fprintf(&report, "\nMCP conformance suite, protocol %s (checks passed/total)\n", conformanceProtocol)
	fmt.Fprintf(&report, "%-30s %-16s %-16s\n", "scenario", paths[0].name, paths[1].name)
	passedScenarios := make([]int, len(paths))
	for j, scenario := range conformanceScenarios {
		fmt.Fprintf(&report, "%-30s %-16s %-16s\n", scenario, scores[0][j], scores[1][j])
		for i := range paths {
			if scores[i][j].total > 0 && scores[i][j].passed == scores[i][j].total {
				passedScenarios[i]++
			}
		}
		assert.Equal(t, scores[0][j], scores[1][j], "%s: the Lambda adapter changes the outcome", scenario)
	}
	fmt.Fprintf(&report, "%-30s %-16s %-16s\n", "scenarios passed",
		fmt.Sprintf("%d/%d", passedScenarios[0], len(conformanceScenarios)),
		fmt.Sprintf("%d/%d", passedScenarios[1], len(conformanceScenarios)))
	t.Log(report.String())
}

// score is one scenario's result: which checks passed, and how many ran.
type score struct {
	passed, total int
	failed        string // ids of the failed checks
}

func (s score) String() string { return fmt.Sprintf("%d/%d", s.passed, s.total) }

// runConformance runs one scenario of the suite and reads its checks.json.
func runConformance(t *testing.T, node, suite, url, scenario string) score {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--scenario", scenario,
		"--spec-version", conformanceProtocol, "-o", out)
	log, err := cmd.CombinedOutput()
	// The suite exits 1 when a check fails; that is a score, not an error.
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("conformance %s: %v\n%s", scenario, err, log)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	require.Len(t, files, 1, "conformance %s wrote no checks.json:\n%s", scenario, log)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var checks []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(data, &checks), "%s", data)
	var s score
	var failed []string
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			s.passed++
			s.total++
		case "FAILURE":
			s.total++
			failed = append(failed, c.ID)
		}
	}
	s.failed = strings.Join(failed, ",")
	return s
}

// withToken puts a reverse proxy in front of target that adds the bearer
// token (the suite cannot send one) and keeps the Host header the client
// sent (DNS-rebinding checks look at it).
func withToken(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

var _ http.Handler = (*apigwfront.Front)(nil)
