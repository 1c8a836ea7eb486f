package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A promise broken by more than the duplicate audit's grace is beyond what
// the design can see: a campaign configured for it would report the
// provider's fault as the server's, so it is refused up front.
func TestConfigRefusesALateCommitOverrunBeyondTheAuditsGrace(t *testing.T) {
	cfg := Default()
	cfg.Engines = []string{"http://127.0.0.1:1"} // never reached: only validated
	require.NoError(t, cfg.Validate(), "the defaults: overrun 10s, grace 18.8s")

	cfg.LateCommitOverrun = 18800 * time.Millisecond
	err := cfg.Validate()
	require.ErrorContains(t, err, "late-commit-overrun must be below the duplicate audit's grace")
	require.ErrorContains(t, err, "18.8s")
}
