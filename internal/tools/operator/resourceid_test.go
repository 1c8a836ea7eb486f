package operator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/alphabettest"
)

func TestAResourceIDIsOneTo128CharactersOfItsAlphabet(t *testing.T) {
	for id, valid := range map[string]bool{
		"ticket-9001":            true,
		"re_9:eu.1":              true,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
		"":                       false,
		"has space":              false,
		"slash/inside":           false,
	} {
		assert.Equal(t, valid, validResourceID(id), "%q", id)
	}
}

func TestTheResourceIDCheckAcceptsExactlyWhatTheSchemaPatternAccepts(t *testing.T) {
	alphabettest.SameAsPattern(t, resourceIDPattern, maxResourceIDLength, validResourceID,
		strings.Repeat("a", 127), strings.Repeat("a", 128), "re_9:eu.1")
}
