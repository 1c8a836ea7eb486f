package app

import (
	"strings"
	"testing"

	"github.com/intentgate/intentgate/internal/alphabettest"
)

func TestTheStageIsOneTo64LettersDigitsDotsUnderscoresAndDashes(t *testing.T) {
	alphabettest.SameAsPattern(t, `^[A-Za-z0-9][A-Za-z0-9._-]*$`, maxStageLength, validStage,
		"prod", "Prod_1.eu-west", strings.Repeat("a", 63), strings.Repeat("a", 64))
}

func TestAnSSMParameterNameIsAPathOfSSMsAlphabet(t *testing.T) {
	alphabettest.SameAsPattern(t, `^/?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$`, 0, validSSMName,
		"/intentgate/prod/risk-api-key", "intentgate/prod", "/a//b", "/a/b/", "//a")
}
