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

// Withdrawals are chosen without drawing from the seed's generator: turning
// them on or off leaves every other draw of a seed as it was, so a
// documented seed replays the same plans. Only tickets whose create fault
// leaves them proven absent are withdrawn.
func TestWithdrawalsLeaveEverySeedsOtherDrawsAsTheyWere(t *testing.T) {
	cfg := Default()
	cfg.ProviderFault = 0.6
	cfg.Withdraw = 0
	without := makePlans(&cfg, 3, 400)
	cfg.Withdraw = 1
	with := makePlans(&cfg, 3, 400)
	require.Len(t, with, len(without))
	withdrawn := 0
	for i := range with {
		if with[i].withdraw {
			withdrawn++
			require.True(t, withdrawable[with[i].provFault], "plan %d withdraws after %q", i, with[i].provFault)
		} else {
			require.False(t, withdrawable[with[i].provFault], "plan %d: every eligible plan withdraws at 1", i)
		}
		require.False(t, without[i].withdraw)
		with[i].withdraw = false
		require.Equal(t, without[i], with[i], "plan %d", i)
	}
	require.Positive(t, withdrawn)
}
