package riskreview

import (
	"testing"

	"github.com/intentgate/intentgate/internal/committedschema"
)

func TestCommittedSchemasAreGeneratedFromTheTypes(t *testing.T) {
	committedschema.Require(t,
		committedschema.Schema{File: inputSchemaFile, Generate: inputSchemaFromTypes, Served: InputSchema},
		committedschema.Schema{File: outputSchemaFile, Generate: outputSchemaFromTypes, Served: OutputSchema},
		committedschema.Schema{File: statusInputSchemaFile, Generate: statusInputSchemaFromTypes, Served: StatusInputSchema},
	)
}
