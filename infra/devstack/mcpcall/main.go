// Command mcpcall is a small MCP client for the devstack, built on the
// official go-sdk client: it lists tools or calls one, with the bearer token
// and protocol version you choose.
//
//	source .devstack/env
//	go run ./infra/devstack/mcpcall -token "$TOKEN_ALICE" tools
//	go run ./infra/devstack/mcpcall -token "$TOKEN_ALICE" call request_risk_review \
//	    '{"order_id":"O20260728001","reason":"chargeback pattern","operation_id":"op-demo-0001"}'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpcall:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", os.Getenv("MCP_URL"), "MCP endpoint (default $MCP_URL)")
	token := flag.String("token", os.Getenv("TOKEN_ALICE"), "bearer token (default $TOKEN_ALICE)")
	protocol := flag.String("protocol", "2026-07-28", "MCP protocol version (2026-07-28, 2025-11-25, ...)")
	idemKey := flag.String("idempotency-key", "", "Idempotency-Key header")
	timeout := flag.Duration("timeout", 30*time.Second, "overall timeout")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mcpcall [flags] tools | call TOOL 'JSON-ARGS'  (flags before the command)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *url == "" || flag.NArg() == 0 {
		flag.Usage()
		return errors.New("need an endpoint and a command (source .devstack/env, which make run writes, sets MCP_URL)")
	}
	if *token == "" {
		return errors.New("no bearer token: pass -token \"$TOKEN_ALICE\" (or another TOKEN_* of .devstack/env, which make run writes)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	client := mcp.NewClient(&mcp.Implementation{Name: "intentgate-mcpcall", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   *url,
		HTTPClient: &http.Client{Transport: headers{token: *token, idempotencyKey: *idemKey}},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: *protocol})
	if err != nil {
		if strings.Contains(err.Error(), http.StatusText(http.StatusUnauthorized)) {
			// The go-sdk client falls back to initialize when server/discover
			// is refused, so the error names initialize whatever -protocol says.
			return fmt.Errorf("connect: %w (HTTP 401: the token was refused; each make run mints new ones, so source .devstack/env again)", err)
		}
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()

	var out any
	switch flag.Arg(0) {
	case "tools":
		out, err = cs.ListTools(ctx, nil)
	case "call":
		if flag.NArg() != 3 {
			flag.Usage()
			return errors.New("call needs TOOL and JSON arguments")
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(flag.Arg(2)), &args); err != nil {
			return fmt.Errorf("arguments are not a JSON object: %w", err)
		}
		var res *mcp.CallToolResult
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: flag.Arg(1), Arguments: args})
		if err == nil {
			out = map[string]any{"isError": res.IsError, "structuredContent": res.StructuredContent}
		}
	default:
		flag.Usage()
		return fmt.Errorf("unknown command %q", flag.Arg(0))
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

type headers struct{ token, idempotencyKey string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.idempotencyKey != "" {
		r.Header.Set("Idempotency-Key", h.idempotencyKey)
	}
	return http.DefaultTransport.RoundTrip(r)
}
