// Package alphabettest checks a hand-written character check against the
// regular expression it stands for. The checks exist because compiling
// an expression at package init costs every cold start; this keeps each
// one saying exactly what its pattern (often also the input schema's)
// says.
package alphabettest

import (
	"regexp"
	"testing"
)

// probe holds the characters a check may get wrong: each class's bounds
// and their neighbours, separators, space, control, and non-ASCII.
const probe = "aAzZ09fgFG/-_.:@ \n\x00é"

// SameAsPattern fails t when match and pattern, with at most maxLen bytes
// (0: any length), disagree on a string: all strings over probe up to
// four characters, each of extra, and each of extra with every probe
// character appended and prepended.
func SameAsPattern(t *testing.T, pattern string, maxLen int, match func(string) bool, extra ...string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	want := func(s string) bool { return re.MatchString(s) && (maxLen == 0 || len(s) <= maxLen) }
	var disagreements []string
	check := func(s string) {
		if match(s) != want(s) {
			disagreements = append(disagreements, s)
		}
	}
	runes := []rune(probe)
	var grow func(prefix string, left int)
	grow = func(prefix string, left int) {
		check(prefix)
		if left == 0 {
			return
		}
		for _, r := range runes {
			grow(prefix+string(r), left-1)
		}
	}
	grow("", 4)
	for _, s := range extra {
		check(s)
		for _, r := range runes {
			check(s + string(r))
			check(string(r) + s)
		}
	}
	if len(disagreements) > 0 {
		t.Errorf("check and %s disagree on %d strings, first %q", pattern, len(disagreements), disagreements[0])
	}
}
