package operator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
