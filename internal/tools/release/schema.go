package release

import (
	"embed"

	"github.com/intentgate/intentgate/internal/tools/toolschema"
)

// JSON Schema 2020-12 documents of this family's tools, generated from the
// types that decode and encode them. Input schemas are closed
// ("additionalProperties": false); Prepare enforces the same rules again,
// so a caller that bypasses the schema gains nothing.
//
// They are generated ahead of time and committed under schemas/
// (toolschema.Committed); TestCommittedSchemasAreGeneratedFromTheTypes
// keeps them equal to what the ...FromTypes functions generate.
//
//go:embed schemas/*.json
var committedSchemas embed.FS

const (
	inputSchemaFile         = "schemas/" + ToolCreate + ".input.json"
	outputSchemaFile        = "schemas/" + ToolCreate + ".output.json"
	approveInputSchemaFile  = "schemas/" + ToolApprove + ".input.json"
	approveOutputSchemaFile = "schemas/" + ToolApprove + ".output.json"
)

const operationIDDescription = "Your key for this intent: choose it before the first attempt and reuse it on every retry. A new id means a new intent."

// InputSchema is create_deployment_ticket's input (Args).
func InputSchema() string { return toolschema.Committed(committedSchemas, inputSchemaFile) }

func inputSchemaFromTypes() string {
	return toolschema.Of[Args](
		toolschema.Property("service", toolschema.Length(serviceLength.min, serviceLength.max), toolschema.Pattern(servicePattern),
			toolschema.Describe("Service to deploy, e.g. payments-api.")),
		toolschema.Property("commit", toolschema.Length(commitLength.min, commitLength.max), toolschema.Pattern(commitPattern),
			toolschema.Describe("Full commit id (40 lowercase hex digits); an abbreviation is refused.")),
		toolschema.Property("environment", toolschema.Length(environmentLength.min, environmentLength.max), toolschema.Pattern(environmentPattern),
			toolschema.Describe("Target environment, e.g. production-eu.")),
		toolschema.Property("operation_id", toolschema.OperationID(operationIDDescription)),
	)
}

// OutputSchema is create_deployment_ticket's structuredContent (Result).
func OutputSchema() string { return toolschema.Committed(committedSchemas, outputSchemaFile) }

func outputSchemaFromTypes() string {
	return toolschema.Of[Result](
		toolschema.Property("ticket_handle", toolschema.Handle()),
		toolschema.Property("status", toolschema.State()),
		toolschema.Property("outcome", toolschema.Outcome()),
		toolschema.Property("retry_allowed", toolschema.Const(false)),
	)
}

// ApproveArgs are approve_rollout's arguments: the ticket operation, by the
// caller's operation_id or by its ticket_handle (exactly one).
type ApproveArgs struct {
	OperationID  string `json:"operation_id,omitempty"`
	TicketHandle string `json:"ticket_handle,omitempty"`
}

// ApproveInputSchema is approve_rollout's input (ApproveArgs).
func ApproveInputSchema() string {
	return toolschema.Committed(committedSchemas, approveInputSchemaFile)
}

func approveInputSchemaFromTypes() string {
	return toolschema.Of[ApproveArgs](
		toolschema.Property("operation_id", toolschema.OperationID(operationIDDescription)),
		toolschema.Property("ticket_handle", toolschema.Handle(), toolschema.Describe("The operation's public handle (ticket_handle).")),
		toolschema.ExactlyOne("operation_id", "ticket_handle"),
	)
}

// ApproveOutputSchema is approve_rollout's structuredContent (Approval).
func ApproveOutputSchema() string {
	return toolschema.Committed(committedSchemas, approveOutputSchemaFile)
}

func approveOutputSchemaFromTypes() string {
	return toolschema.Of[Approval](
		toolschema.Property("operation_id", toolschema.Describe("Your own key for the ticket operation; null when it is another client's or tenant's.")),
		toolschema.Property("ticket_id", toolschema.MinLength(1)),
		toolschema.Property("effect_receipt", toolschema.MinLength(1)),
		toolschema.Property("decision", toolschema.Const("approved")),
	)
}
