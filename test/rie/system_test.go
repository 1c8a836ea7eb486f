//go:build linux

package rie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/testsync"
)

var (
	engine  *enginetest.Engine
	bins    artifacts
	binsErr error
)

// TestMain builds the bootstraps and installs the emulator while the engine
// starts, so both waits overlap.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "intentgate-rie-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rie:", err)
		os.Exit(1)
	}
	type prepared struct {
		a   artifacts
		err error
	}
	ready := make(chan prepared, 1)
	go func() {
		a, err := prepare(context.Background(), dir)
		ready <- prepared{a, err}
	}()
	code := enginetest.Main(m, func(e *enginetest.Engine) {
		engine = e
		p := <-ready
		bins, binsErr = p.a, p.err
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// needBinaries skips when the emulator could not be downloaded and fails on
// any other build or install error.
func needBinaries(t *testing.T) artifacts {
	t.Helper()
	if errors.Is(binsErr, errProxyUnreachable) {
		t.Skipf("SKIP: cannot install the Lambda Runtime Interface Emulator (needed to run the functions): %v", binsErr)
	}
	require.NoError(t, binsErr, "building the bootstraps or installing the emulator")
	return bins
}

// Service keys the simulators accept, and the audience tokens are minted
// for (the API Gateway URL the samples were recorded against).
const (
	riskAPIKey    = "risk-service-key-rie"
	releaseAPIKey = "release-service-key-rie"
	resourceURL   = "https://k7x2m9p4qa.execute-api.us-east-1.amazonaws.com/mcp"
	deployGrants  = "team-payments=payments-api,orders-api"
)

// system is everything around a function: issuer, simulators and its own
// table, plus the environment that configures a function against them and
// an in-process app built from that same environment.
type system struct {
	env    map[string]string
	app    *app.App
	issuer *issuer.Issuer
	risk   *riskapi.Server
}

func newSystem(t *testing.T) system {
	t.Helper()
	ctx := context.Background()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	iss, err := issuer.New("http://" + ln.Addr().String())
	require.NoError(t, err)
	issuerSrv := httptest.NewUnstartedServer(iss.Handler())
	require.NoError(t, issuerSrv.Listener.Close())
	issuerSrv.Listener = ln
	issuerSrv.Start()
	t.Cleanup(issuerSrv.Close)

	risk := riskapi.New(riskapi.Config{APIKey: riskAPIKey, HoldLimit: 5 * time.Second})
	riskSrv := httptest.NewServer(risk)
	t.Cleanup(riskSrv.Close)
	releaseSrv := httptest.NewServer(releaseapi.New(releaseapi.Config{APIKey: releaseAPIKey}))
	t.Cleanup(releaseSrv.Close)

	region := engine.Region()
	if region == "" {
		region = "us-east-1"
	}
	env := map[string]string{
		"INTENTGATE_TABLE":              enginetest.TableName(t),
		"INTENTGATE_DYNAMODB_ENDPOINT":  engine.Endpoint(),
		"AWS_REGION":                    region,
		"INTENTGATE_RESOURCE_URL":       resourceURL,
		"INTENTGATE_JWT_ISSUER":         iss.URL(),
		"INTENTGATE_JWKS_URL":           iss.JWKSURL(),
		"INTENTGATE_RISK_API_URL":       riskSrv.URL,
		"INTENTGATE_RISK_API_KEY":       riskAPIKey,
		"INTENTGATE_RISK_SETTLE_WINDOW": "0s",
		"INTENTGATE_BUDGET_DOWNSTREAM":  "300ms",
		// The 300 ms production store budget is not met by the local engine
		// on a loaded shared machine; these tests check behaviour.
		"INTENTGATE_BUDGET_STORE":    "3s",
		"INTENTGATE_RELEASE_API_URL": releaseSrv.URL,
		"INTENTGATE_RELEASE_API_KEY": releaseAPIKey,
		"INTENTGATE_DEPLOY_GRANTS":   deployGrants,
		// As template.yaml sets it under the function's 256 MB.
		"GOMEMLIMIT": "200MiB",
	}
	// Real DynamoDB (INTENTGATE_ENGINE_KIND=dynamodb) needs the credentials in the environment.
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}

	cfg, err := app.FromEnv(lookup(env))
	require.NoError(t, err)
	a, err := app.Build(ctx, cfg, app.Options{Out: &testsync.Buffer{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	enginetest.EnsureTable(t, a.Store)
	return system{env: env, app: a, issuer: iss, risk: risk}
}

// functionEnv is the environment of a function under the emulator: the
// system's configuration plus what Lambda itself would set.
func (s system) functionEnv(name string) map[string]string {
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":    name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
	}
	for k, v := range s.env {
		env[k] = v
	}
	return env
}

func lookup(env map[string]string) app.Lookup {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// sample reads one of the recorded events of /events.
func sample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	require.NoError(t, err, "sample event %s", name)
	require.True(t, json.Valid(b), "sample event %s is not JSON", name)
	return b
}
