package reconcile_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

// The first create is held and commits past its deadline (the provider
// breaks its promise); absence is proven at the deadline and the re-send
// is rejected by the provider's policy. A rejection proves only that the
// re-send made nothing: the operation must not FAIL and give the fact up,
// or the late commit would become a ticket of an operation recorded as
// having none and a second intent for the fact would make another. It
// stays UNKNOWN, finds the late ticket, and a second intent is
// deduplicated onto it.
func TestARejectedResendAfterABrokenPromiseFindsTheLateCommitInsteadOfFailing(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	first := f.submitWithFault(t, releaseapi.CreateCommitLateBeyondDeadline, 5*time.Second)
	require.Equal(t, operation.StateUnknown, first.State)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateReject, Times: 1}}, LateCommitOverrunMS: 5000}))

	got := f.drive(t, first.Handle)

	require.True(t, journalHas(got, "probe_not_found"), "absence was proven first: %+v", got.Journal)
	assert.Equal(t, operation.StateSucceeded, got.State, "journal: %+v", got.Journal)
	assert.Equal(t, "ticket-9001", got.ResourceID, "the late commit is the operation's effect")
	assert.Equal(t, 1, f.tickets())

	args, err := json.Marshal(map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu", "operation_id": "deploy-payments-again"})
	require.NoError(t, err)
	again, err := f.disp.Submit(context.Background(), f.fam, deployer, args, "")
	require.NoError(t, err)
	assert.Equal(t, first.Handle, again.Operation.Handle, "the fact is still held: a second intent is deduplicated")
	assert.Equal(t, 1, f.tickets(), "one fact, one ticket")
}
