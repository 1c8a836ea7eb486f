package operator

import (
	"testing"

	"github.com/intentgate/intentgate/internal/committedschema"
)

func TestCommittedSchemasAreGeneratedFromTheTypes(t *testing.T) {
	committedschema.Require(t,
		committedschema.Schema{File: getOperationInputSchemaFile, Generate: getOperationInputSchemaFromTypes, Served: GetOperationInputSchema},
		committedschema.Schema{File: resolveInputSchemaFile, Generate: resolveInputSchemaFromTypes, Served: ResolveInputSchema},
	)
}
