package mcpserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/committedschema"
)

// envelopeFromType is the error envelope generated from ErrorBody at run
// time, as the server built it before the envelope was committed.
func envelopeFromType(t *testing.T, codes []string) string {
	t.Helper()
	raw, err := errorEnvelopeSchemaFromType(codes)
	require.NoError(t, err)
	return string(raw)
}

// The committed envelope is ErrorBody's schema with a placeholder where
// the configured codes go.
func TestCommittedSchemasAreGeneratedFromTheTypes(t *testing.T) {
	committedschema.Require(t, committedschema.Schema{
		File:     errorEnvelopeFile,
		Generate: func() string { return envelopeFromType(t, []string{errorCodesPlaceholder}) },
		Served: func() string {
			template, err := errorEnvelopeTemplate()
			require.NoError(t, err)
			return string(template)
		},
	})
}

// The codes are configuration (Config.ErrorCodes), so they are put into
// the committed envelope at start: the result is byte for byte what
// generating it from the type with those codes gives.
func TestTheErrorEnvelopeIsTheTypesSchemaWithTheConfiguredCodes(t *testing.T) {
	for name, codes := range map[string][]string{
		"this package's own":          errorCodes(nil),
		"a server's vocabulary":       errorCodes([]string{"UNAUTHENTICATED", "NOT_FOUND", "OPERATION_ESCALATED"}),
		"one code":                    {"ONLY"},
		"characters JSON must escape": {`QUOTE"D`, `BACK\SLASH`, "<TAG>&AMP", "NEW\nLINE", "ÜNICODE"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := errorEnvelopeSchema(codes)
			require.NoError(t, err)
			assert.Equal(t, envelopeFromType(t, codes), string(got))
		})
	}
}
