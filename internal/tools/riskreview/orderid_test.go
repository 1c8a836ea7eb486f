package riskreview

import (
	"testing"

	"github.com/intentgate/intentgate/internal/alphabettest"
)

func TestAnOrderIDIsOAndElevenDigits(t *testing.T) {
	alphabettest.SameAsPattern(t, `^O[0-9]{11}$`, 0, validOrderID, "O20260728001", "O2026072800", "O202607280011", "o20260728001")
}
