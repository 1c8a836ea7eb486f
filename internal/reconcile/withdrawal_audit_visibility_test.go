package reconcile_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// The withdrawal audit reads the operation holding the fact now, which may
// be another team's (granted the same service). The withdrawn operation's
// journal, which get_operation shows its owner, must not name the holder's
// handle or effects: once the owner's team loses the grant it may not see
// the holder ("not visible reads exactly like not existing").
func TestAWithdrawalAuditNeverShowsTheHolderToAViewerWhoMayNotSeeIt(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterAbsence(t, releaseapi.CreateTimeoutBeforeCommit)

	// Another team, granted the same service, asks for the fact.
	platform := tools.Caller{ClientID: "platform-agent", UserID: "pat", TenantID: "team-platform", Roles: []string{policy.RoleDeployer}}
	both := release.New(f.client, policy.DeployGrants{"team-payments": {"payments-api"}, "team-platform": {"payments-api"}}, f.fam.Recovery())
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{}))
	args, err := json.Marshal(map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234",
		"environment": "production-eu", "operation_id": "platform-deploy-1"})
	require.NoError(t, err)
	sub, err := f.disp.Submit(context.Background(), both, platform, args, "")
	require.NoError(t, err)
	holder := sub.Operation
	require.Equal(t, operation.StateSucceeded, holder.State)

	got := f.drive(t, withdrawn.Handle)
	require.False(t, got.NeedsReconciliation())

	// Later the payments team loses the service (ownership moved to the
	// platform team). Its user still owns, and so sees, the withdrawn
	// operation; it may not see the platform team's.
	revoked := tools.NewVisibility(release.New(f.client, policy.DeployGrants{"team-platform": {"payments-api"}}, f.fam.Recovery()))
	require.True(t, revoked.CanSee(deployer, got.Owner()), "the owner sees its own withdrawn operation")
	require.False(t, revoked.CanSee(deployer, holder.Owner()), "the platform team's operation is not visible to the payments user")

	body, err := json.Marshal(packet.Build(got, deployer))
	require.NoError(t, err)
	require.False(t, strings.Contains(string(body), holder.Handle) || strings.Contains(string(body), holder.ResourceID),
		"get_operation of its own operation shows the payments user another tenant's operation it may not see: handle %s, ticket %s, in %s",
		holder.Handle, holder.ResourceID, got.Journal[len(got.Journal)-1].Detail)
}
