package riskreview

import (
	"embed"

	"github.com/intentgate/intentgate/internal/tools/toolschema"
)

// The schemas this family serves are generated from its types ahead of time
// and committed under schemas/ (toolschema.Committed);
// TestCommittedSchemasAreGeneratedFromTheTypes keeps them equal to what
// the ...FromTypes functions generate.
//
//go:embed schemas/*.json
var committedSchemas embed.FS

const (
	inputSchemaFile       = "schemas/" + ToolRequest + ".input.json"
	outputSchemaFile      = "schemas/" + ToolRequest + ".output.json"
	statusInputSchemaFile = "schemas/" + ToolStatus + ".input.json"
)

// InputSchema is request_risk_review's input (Args).
func InputSchema() string { return toolschema.Committed(committedSchemas, inputSchemaFile) }

func inputSchemaFromTypes() string {
	return toolschema.Of[Args](
		toolschema.Property("order_id", toolschema.Length(1, 64), toolschema.Describe("The order to review, e.g. O20260728001.")),
		toolschema.Property("reason", toolschema.Length(1, MaxReasonRunes), toolschema.Describe("Why a review is needed.")),
		toolschema.Property("operation_id", toolschema.OperationID(
			"Your key for this intent: choose it before the first attempt and reuse it on every retry.")),
	)
}

// OutputSchema is the structured result of both risk-review tools
// (Result). A caller may rely on the handle, status, outcome and
// retry_allowed; the rest depends on the state.
func OutputSchema() string { return toolschema.Committed(committedSchemas, outputSchemaFile) }

func outputSchemaFromTypes() string {
	return toolschema.Of[Result](
		toolschema.Property("status", toolschema.State()),
		toolschema.Property("outcome", toolschema.Outcome()),
		toolschema.Property("next_action", toolschema.NeverNull()),
		toolschema.Required("review_id", "status", "outcome", "retry_allowed"),
	)
}

// StatusArgs are get_risk_review_status's arguments.
type StatusArgs struct {
	ReviewID string `json:"review_id"`
}

// StatusInputSchema is get_risk_review_status's input (StatusArgs).
func StatusInputSchema() string { return toolschema.Committed(committedSchemas, statusInputSchemaFile) }

func statusInputSchemaFromTypes() string {
	return toolschema.Of[StatusArgs](toolschema.Property("review_id", toolschema.Length(29, 29), toolschema.Handle()))
}
