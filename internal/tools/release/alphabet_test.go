package release

import (
	"strings"
	"testing"

	"github.com/intentgate/intentgate/internal/alphabettest"
)

func TestTheArgumentChecksAcceptExactlyWhatTheSchemaPatternsAccept(t *testing.T) {
	alphabettest.SameAsPattern(t, servicePattern, 0, lowerSlug, "payments-api", strings.Repeat("a-9", 30))
	alphabettest.SameAsPattern(t, environmentPattern, 0, lowerSlug, "prod-eu-1")
	alphabettest.SameAsPattern(t, commitPattern, 0, lowerHex, strings.Repeat("0123456789abcdef", 3))
}
