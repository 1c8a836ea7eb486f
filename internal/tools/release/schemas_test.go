package release

import (
	"testing"

	"github.com/intentgate/intentgate/internal/committedschema"
)

func TestCommittedSchemasAreGeneratedFromTheTypes(t *testing.T) {
	committedschema.Require(t,
		committedschema.Schema{File: inputSchemaFile, Generate: inputSchemaFromTypes, Served: InputSchema},
		committedschema.Schema{File: outputSchemaFile, Generate: outputSchemaFromTypes, Served: OutputSchema},
		committedschema.Schema{File: approveInputSchemaFile, Generate: approveInputSchemaFromTypes, Served: ApproveInputSchema},
		committedschema.Schema{File: approveOutputSchemaFile, Generate: approveOutputSchemaFromTypes, Served: ApproveOutputSchema},
	)
}
