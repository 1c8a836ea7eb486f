package packet

import (
	"testing"

	"github.com/intentgate/intentgate/internal/committedschema"
)

func TestCommittedSchemasAreGeneratedFromTheTypes(t *testing.T) {
	committedschema.Require(t,
		committedschema.Schema{File: outputSchemaFile, Generate: outputSchemaFromTypes, Served: OutputSchema},
	)
}
