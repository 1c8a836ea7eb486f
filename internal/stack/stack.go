// Package stack starts the whole system on one machine: a token issuer with
// its JWKS, the Risk and Release API simulators, the operations table on a
// DynamoDB-compatible engine, and one or more MCP server replicas sharing
// it. The devstack (`make run`) and the end-to-end tests both use it, so
// what a developer runs is what the tests check.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/intentgate/intentgate/internal/app"
	"github.com/intentgate/intentgate/internal/auth/issuer"
	"github.com/intentgate/intentgate/internal/lambdahttp"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// Config of a stack. Addresses "127.0.0.1:0" pick a free port.
type Config struct {
	EngineEndpoint string // the DynamoDB-compatible engine (required)
	Table          string // created if absent
	MCPAddrs       []string
	RiskAddr       string
	ReleaseAddr    string
	IssuerAddr     string
	// ResourceURL is the MCP URL tokens are minted for; default the first
	// replica's URL.
	ResourceURL string
	// Env overrides configuration variables (app.FromEnv names) for every
	// replica, e.g. budgets or gate sizes in tests.
	Env map[string]string
	// Out receives the replicas' audit records, metrics and logs.
	Out   io.Writer
	Clock func() time.Time
	// ReleaseSearchLag is the Release simulator's index lag.
	ReleaseSearchLag time.Duration
}

// Service credentials the simulators accept; never a caller's token.
const (
	RiskAPIKey    = "risk-service-key-devstack"
	ReleaseAPIKey = "release-service-key-devstack"
	// DeployGrants: the payments team may ticket these two services only.
	DeployGrants = "team-payments=payments-api,orders-api"
)

// Stack is a running system.
type Stack struct {
	MCPURLs     []string
	ResourceURL string
	RiskURL     string
	ReleaseURL  string
	IssuerURL   string
	Risk        *riskapi.Server
	Release     *releaseapi.Server
	Issuer      *issuer.Issuer
	Apps        []*app.App

	stops []func()
	errc  chan error
}

// Start brings everything up. Stop it with Stop.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if cfg.EngineEndpoint == "" || cfg.Table == "" || len(cfg.MCPAddrs) == 0 {
		return nil, errors.New("stack: engine endpoint, table and at least one MCP address are required")
	}
	s := &Stack{errc: make(chan error, 8)}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	issuerLn, err := listen(cfg.IssuerAddr)
	if err != nil {
		return nil, err
	}
	s.IssuerURL = "http://" + issuerLn.Addr().String()
	if s.Issuer, err = issuer.New(s.IssuerURL); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.serve(issuerLn, s.Issuer.Handler())

	s.Risk = riskapi.New(riskapi.Config{APIKey: RiskAPIKey, Clock: cfg.Clock})
	if s.RiskURL, err = s.serveOn(cfg.RiskAddr, s.Risk); err != nil {
		return nil, err
	}
	s.Release = releaseapi.New(releaseapi.Config{APIKey: ReleaseAPIKey, Clock: cfg.Clock, SearchLag: cfg.ReleaseSearchLag})
	if s.ReleaseURL, err = s.serveOn(cfg.ReleaseAddr, s.Release); err != nil {
		return nil, err
	}

	mcpLns := make([]net.Listener, len(cfg.MCPAddrs))
	for i, addr := range cfg.MCPAddrs {
		if mcpLns[i], err = listen(addr); err != nil {
			return nil, err
		}
		s.MCPURLs = append(s.MCPURLs, "http://"+mcpLns[i].Addr().String()+"/mcp")
	}
	s.ResourceURL = cfg.ResourceURL
	if s.ResourceURL == "" {
		s.ResourceURL = s.MCPURLs[0]
	}
	// One task id key for every replica of this stack, so a task created
	// on one is answered by any (MCP Tasks on, as in the walkthrough).
	taskKey := make([]byte, 32)
	if _, err := rand.Read(taskKey); err != nil {
		return nil, fmt.Errorf("stack: task id key: %w", err)
	}
	env := map[string]string{
		"INTENTGATE_TASK_ID_KEY":       hex.EncodeToString(taskKey),
		"INTENTGATE_DYNAMODB_ENDPOINT": cfg.EngineEndpoint,
		"INTENTGATE_TABLE":             cfg.Table,
		"INTENTGATE_RESOURCE_URL":      s.ResourceURL,
		"INTENTGATE_JWT_ISSUER":        s.IssuerURL,
		"INTENTGATE_JWKS_URL":          s.Issuer.JWKSURL(),
		"INTENTGATE_RISK_API_URL":      s.RiskURL,
		"INTENTGATE_RISK_API_KEY":      RiskAPIKey,
		"INTENTGATE_RELEASE_API_URL":   s.ReleaseURL,
		"INTENTGATE_RELEASE_API_KEY":   ReleaseAPIKey,
		"INTENTGATE_DEPLOY_GRANTS":     DeployGrants,
		// An empty search proves nothing until the index covers the
		// dispatch: the settle window follows the simulator's lag.
		"INTENTGATE_RELEASE_SETTLE_WINDOW": release.RecoveryForLag(cfg.ReleaseSearchLag).SettleWindow.String(),
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	appCfg, err := app.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	for i, ln := range mcpLns {
		a, err := app.Build(ctx, appCfg, app.Options{Out: cfg.Out, Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("stack: replica %d: %w", i, err)
		}
		s.Apps = append(s.Apps, a)
		s.stops = append(s.stops, func() { _ = a.Close(context.Background()) })
		if i == 0 {
			if err := a.Store.EnsureTable(ctx); err != nil {
				return nil, fmt.Errorf("stack: %w", err)
			}
		}
		h, err := a.Handler(ctx)
		if err != nil {
			return nil, fmt.Errorf("stack: replica %d: %w", i, err)
		}
		s.serve(ln, lambdahttp.LocalHandler(h, a.LambdaOptions()))
	}
	return s, nil
}

// Errors reports a server that stopped unexpectedly.
func (s *Stack) Errors() <-chan error { return s.errc }

// Stop shuts every server down, newest first.
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stack: listen %s: %w", addr, err)
	}
	return ln, nil
}

func (s *Stack) serveOn(addr string, h http.Handler) (string, error) {
	ln, err := listen(addr)
	if err != nil {
		return "", err
	}
	s.serve(ln, h)
	return "http://" + ln.Addr().String(), nil
}

func (s *Stack) serve(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("server on %s: %w", ln.Addr(), err)
		}
	}()
	s.stops = append(s.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	})
}

// Persona is a named caller of the devstack.
type Persona struct {
	Name, Subject, ClientID, Merchant string
	Roles                             []string
}

// Personas: support agents of two merchants (two of M1, who share the
// client and the tenant: tenant-mates), a deployer of the payments team,
// and an operator.
func Personas() []Persona {
	return []Persona{
		{Name: "ALICE", Subject: "alice", ClientID: "support-assistant", Merchant: "M1", Roles: []string{"support_agent"}},
		{Name: "CAROL", Subject: "carol", ClientID: "support-assistant", Merchant: "M1", Roles: []string{"support_agent"}},
		{Name: "BOB", Subject: "bob", ClientID: "support-assistant", Merchant: "M2", Roles: []string{"support_agent"}},
		{Name: "DEPLOYER", Subject: "dana", ClientID: "release-agent", Merchant: "team-payments", Roles: []string{"deployer"}},
		{Name: "OPERATOR", Subject: "oscar", ClientID: "ops-console", Merchant: "team-payments", Roles: []string{"operator"}},
	}
}

// Token mints a token for a persona, valid for ttl, for this stack's resource.
func (s *Stack) Token(p Persona, ttl time.Duration) (string, error) {
	return s.Issuer.Mint(issuer.Claims{
		Subject: p.Subject, ClientID: p.ClientID, MerchantID: p.Merchant, Roles: p.Roles,
		Audience: s.ResourceURL, TTL: ttl,
	})
}

// EnvFile renders the shell exports `make run` writes to .devstack/env.
func (s *Stack) EnvFile(engine string, ttl time.Duration) (string, error) {
	out := "export MCP_URL=" + strconv.Quote(s.MCPURLs[0]) + "\n" +
		"export RISK_API_URL=" + strconv.Quote(s.RiskURL) + "\n" +
		"export RELEASE_API_URL=" + strconv.Quote(s.ReleaseURL) + "\n" +
		"export DYNAMODB_ENDPOINT=" + strconv.Quote(engine) + "\n" +
		"export ISSUER_URL=" + strconv.Quote(s.IssuerURL) + "\n"
	for _, p := range Personas() {
		tok, err := s.Token(p, ttl)
		if err != nil {
			return "", err
		}
		out += "export TOKEN_" + p.Name + "=" + strconv.Quote(tok) + "\n"
	}
	return out, nil
}
