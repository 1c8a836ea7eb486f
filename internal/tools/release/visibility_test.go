package release_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

func TestATeamGrantedTheServiceSeesItsTicketsAndNoOtherTeamDoes(t *testing.T) {
	f := release.New(nil, grants, release.DefaultRecovery())
	v := tools.NewVisibility(f)
	ticket := operation.Owner{Tool: release.ToolCreate, EndUserID: "dana", TenantID: "team-payments",
		Target: map[string]string{"service": "payments-api", "commit": "abcdef1", "environment": "prod"}}

	assert.True(t, v.CanSee(tools.Caller{UserID: "erin", TenantID: "team-payments"}, ticket), "a teammate granted the service")
	assert.False(t, v.CanSee(tools.Caller{UserID: "dana", TenantID: "team-billing"}, ticket), "the same sub in a team without the grant")
	assert.False(t, v.CanSee(tools.Caller{UserID: "erin"}, ticket), "no team in the token")
	foreignService := ticket
	foreignService.Target = map[string]string{"service": "billing-api"}
	assert.True(t, v.CanSee(tools.Caller{UserID: "bill", TenantID: "team-billing"}, foreignService), "the grant covers the resource, whoever created it")
	assert.True(t, v.CanSee(tools.Caller{UserID: "dana", TenantID: "team-payments"}, foreignService), "tenant and subject are enough")
	assert.False(t, v.CanSee(tools.Caller{UserID: "erin", TenantID: "team-payments"}, foreignService), "a teammate without the grant")
}
