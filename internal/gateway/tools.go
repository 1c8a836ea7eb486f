package gateway

import "github.com/intentgate/intentgate/internal/mcpserver"

// Tools lists every MCP tool the gateway serves: each published write tool,
// the families' own read and dependent-action tools, and the operation
// tools every family shares.
func (g *Gateway) Tools() []mcpserver.Tool {
	var all []mcpserver.Tool
	for _, w := range g.cfg.Writes {
		all = append(all, g.writeTool(w))
	}
	if g.cfg.Risk != nil {
		all = append(all, g.riskStatusTool())
	}
	if g.cfg.Release != nil {
		all = append(all, g.ticketTools()...)
	}
	return append(all, g.operationTools()...)
}
