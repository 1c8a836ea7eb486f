// Package operator publishes the tools that read and settle an operation
// of any write tool family: get_operation (the review packet) and
// resolve_operation (an operator's resolution of an ESCALATED operation,
// or closing of an effect reported after an operation FAILED, checked
// against the family's provider). They are served like every
// family's own operation tools (tools.OperationTool).
package operator

import (
	"context"
	"encoding/json"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Tools are get_operation and resolve_operation over the operations of
// families, the write tools this server serves; ex records resolutions.
func Tools(ex *tools.Executor, families []tools.WriteTool) []tools.OperationTool {
	byName := make(map[string]tools.WriteTool, len(families))
	for _, f := range families {
		byName[f.Name()] = f
	}
	return []tools.OperationTool{{
		Name:         packet.ToolGetOperation,
		Title:        "Operation review packet",
		Description:  "The journal of a write operation: intended effect, state, outcome, attempts, timeouts, reconciliation evidence and receipt.",
		InputSchema:  GetOperationInputSchema(),
		OutputSchema: packet.OutputSchema(),
		Kind:         tools.Reads,
		HandleArg:    "handle",
		Serve: func(_ context.Context, caller tools.Caller, op operation.Operation, _ json.RawMessage) (tools.Rendered, error) {
			return tools.Rendered{Body: packet.Build(op, caller)}, nil
		},
	}, {
		Name:         packet.ToolResolveOperation,
		Title:        "Resolve an escalated operation, or close an effect reported after a failure",
		Description:  "Operators only: settle an ESCALATED operation to SUCCEEDED or FAILED with evidence, or close an effect reported after an operation FAILED once it is removed or is the fact holder's verified effect (FAILED, effects_removed).",
		InputSchema:  ResolveInputSchema(),
		OutputSchema: ResolveOutputSchema(),
		Kind:         tools.Settles,
		HandleArg:    "handle",
		Serve: func(ctx context.Context, caller tools.Caller, op operation.Operation, raw json.RawMessage) (tools.Rendered, error) {
			var args ResolveArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return tools.Rendered{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "arguments: %v", err)
			}
			settled, err := Resolve(ctx, ex, byName[op.Key.Tool], caller, op, Resolution{Outcome: args.Resolution, Evidence: args.Evidence,
				ResourceID: args.ResourceID, EffectsRemoved: args.EffectsRemoved, LateCommitsRuledOut: args.LateCommitsRuledOut})
			if err != nil {
				return tools.Rendered{}, err
			}
			return tools.Rendered{Body: packet.Build(settled, caller), Operation: settled}, nil
		},
	}}
}
