package gateway

import "github.com/intentgate/intentgate/internal/mcpserver"

// Tools lists every MCP tool the gateway serves.
func (g *Gateway) Tools() []mcpserver.Tool {
	return g.riskTools()
}
