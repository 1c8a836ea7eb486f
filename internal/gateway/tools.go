package gateway

import (
	"net/http"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/operator"
)

// Tools lists every MCP tool the gateway serves: each published write tool
// followed by its family's companions, then the operator tools every
// family shares.
func (g *Gateway) Tools() []mcpserver.Tool {
	var all []mcpserver.Tool
	families := make([]tools.WriteTool, 0, len(g.cfg.Writes))
	for _, w := range g.cfg.Writes {
		all = append(all, g.writeTool(w))
		for _, c := range w.Companions() {
			all = append(all, g.operationTool(c))
		}
		families = append(families, w)
	}
	for _, t := range operator.Tools(g.cfg.Executor, families) {
		all = append(all, g.operationTool(t))
	}
	return all
}

// Handler serves the gateway's tools as an MCP endpoint described by cfg,
// whose error envelope admits every business code (tools.AllCodes).
func (g *Gateway) Handler(cfg mcpserver.Config) (http.Handler, error) {
	cfg.ErrorCodes = errorCodes()
	return mcpserver.New(cfg, g.Tools()...)
}
