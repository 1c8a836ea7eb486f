package packet

import (
	"embed"

	"github.com/intentgate/intentgate/internal/tools/toolschema"
)

// The schema is generated ahead of time and committed under schemas/
// (toolschema.Committed); TestCommittedSchemasAreGeneratedFromTheTypes
// keeps it equal to what outputSchemaFromTypes generates.
//
//go:embed schemas/*.json
var committedSchemas embed.FS

const outputSchemaFile = "schemas/" + ToolGetOperation + ".output.json"

// OutputSchema is the JSON Schema 2020-12 of get_operation's (and
// resolve_operation's) structuredContent, generated from Packet: every
// field is typed and required (absent evidence is null, not missing);
// additionalProperties is false throughout.
func OutputSchema() string { return toolschema.Committed(committedSchemas, outputSchemaFile) }

func outputSchemaFromTypes() string {
	return toolschema.Of[Packet](
		toolschema.Property("operation_id", toolschema.Length(8, 128),
			toolschema.Describe("Your own key for the operation; null when it belongs to another client or tenant (use handle).")),
		toolschema.Property("handle", toolschema.Handle()),
		toolschema.Property("state", toolschema.State()),
		toolschema.Property("outcome", toolschema.Outcome()),
		toolschema.Property("attempts", toolschema.NotNegative()),
		toolschema.Property("client_timeouts", toolschema.NotNegative()),
		toolschema.Property("duplicate_resources", toolschema.NotNegative()),
		toolschema.Property("approval_may_have_been_given", toolschema.Describe(
			"True when the operation was SUCCEEDED and approvable before it became an incident: "+
				"an approval of a dependent action may already have been given and must be reviewed.")),
		toolschema.Property("request_digest", toolschema.Pattern("^sha256:[0-9a-f]{64}$"),
			toolschema.Describe("SHA-256 of your arguments; null when the operation's key is another client's or tenant's.")),
		toolschema.Property("retry_allowed", toolschema.Const(false)),
		toolschema.Property("created_at", toolschema.DateTime()),
		toolschema.Property("updated_at", toolschema.DateTime()),
		// Timeline never returns nil: an empty journal is [].
		toolschema.Property("timeline", toolschema.NeverNull(), toolschema.Items(toolschema.Property("at", toolschema.DateTime()))),
	)
}
