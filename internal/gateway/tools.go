package gateway

import "github.com/intentgate/intentgate/internal/mcpserver"

// Tools lists every MCP tool the gateway serves.
func (g *Gateway) Tools() []mcpserver.Tool {
	all := append(g.riskTools(), g.operationTools()...)
	if g.cfg.Release != nil {
		all = append(all, g.ticketTools()...)
	}
	return all
}
