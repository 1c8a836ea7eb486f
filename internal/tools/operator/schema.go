package operator

import (
	"embed"

	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/toolschema"
)

// JSON Schema 2020-12 documents of the operator tools, generated from the
// types that decode their arguments; both answer with the review packet.
// They are generated ahead of time and committed under schemas/
// (toolschema.Committed); TestCommittedSchemasAreGeneratedFromTheTypes
// keeps them equal to what the ...FromTypes functions generate.
//
//go:embed schemas/*.json
var committedSchemas embed.FS

const (
	getOperationInputSchemaFile = "schemas/" + packet.ToolGetOperation + ".input.json"
	resolveInputSchemaFile      = "schemas/" + packet.ToolResolveOperation + ".input.json"
)

const operationIDDescription = "Your key for this intent: choose it before the first attempt and reuse it on every retry. A new id means a new intent."

const handleDescription = "The operation's public handle (ticket_handle)."

// GetArgs are get_operation's arguments: the caller's operation_id or the
// public handle (exactly one).
type GetArgs struct {
	OperationID string `json:"operation_id,omitempty"`
	Handle      string `json:"handle,omitempty"`
}

// ResolveArgs are resolve_operation's arguments. The operation is named by
// handle (operators act on other clients' operations) or by the
// operator's own operation_id. resource_id is required by Resolve for
// SUCCEEDED unless the operation already records one; effects_removed is
// required by Resolve for FAILED when effects are known.
type ResolveArgs struct {
	OperationID    string `json:"operation_id,omitempty"`
	Handle         string `json:"handle,omitempty"`
	Resolution     string `json:"resolution"`
	Evidence       string `json:"evidence"`
	ResourceID     string `json:"resource_id,omitempty"`
	EffectsRemoved bool   `json:"effects_removed,omitempty"`
	// LateCommitsRuledOut is required by Resolve for FAILED when a request
	// may still commit at a provider that promises no commit deadline.
	LateCommitsRuledOut bool `json:"late_commits_ruled_out,omitempty"`
}

// GetOperationInputSchema is get_operation's input (GetArgs).
func GetOperationInputSchema() string {
	return toolschema.Committed(committedSchemas, getOperationInputSchemaFile)
}

func getOperationInputSchemaFromTypes() string {
	return toolschema.Of[GetArgs](
		toolschema.Property("operation_id", toolschema.OperationID(operationIDDescription)),
		toolschema.Property("handle", toolschema.Handle(), toolschema.Describe(handleDescription)),
		toolschema.ExactlyOne("operation_id", "handle"),
	)
}

// ResolveInputSchema is resolve_operation's input (ResolveArgs; operators
// only).
func ResolveInputSchema() string {
	return toolschema.Committed(committedSchemas, resolveInputSchemaFile)
}

func resolveInputSchemaFromTypes() string {
	return toolschema.Of[ResolveArgs](
		toolschema.Property("operation_id", toolschema.OperationID(operationIDDescription)),
		toolschema.Property("handle", toolschema.Handle(), toolschema.Describe(handleDescription)),
		toolschema.Property("resolution", toolschema.Enum(ResolutionSucceeded, ResolutionFailed)),
		toolschema.Property("evidence", toolschema.Length(1, MaxEvidenceRunes),
			toolschema.Describe("The operator's statement of what was checked and found.")),
		toolschema.Property("resource_id", toolschema.Length(1, maxResourceIDLength), toolschema.Pattern(resourceIDPattern),
			toolschema.Describe("The effect the operator verified (e.g. the ticket id to keep).")),
		toolschema.Property("effects_removed", toolschema.Describe("FAILED only: the operator states every effect of this operation "+
			"was removed at the provider (for effects reported after it FAILED: removed, or the verified effect of the operation "+
			"holding the fact now). Required to resolve FAILED when effects are known to exist; recorded in the journal.")),
		toolschema.Property("late_commits_ruled_out", toolschema.Describe("FAILED only: the operator states no request of this operation "+
			"already sent can still commit at the provider. Required to resolve FAILED when the provider promises no commit deadline "+
			"and a request may have reached it; recorded in the journal.")),
		toolschema.ExactlyOne("operation_id", "handle"),
	)
}

// ResolveOutputSchema: resolve_operation answers with the review packet.
func ResolveOutputSchema() string { return packet.OutputSchema() }
