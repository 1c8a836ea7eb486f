package tools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// serviceGrant covers every operation whose service is granted to the
// caller's team, like the release family's deploy grants.
type serviceGrant struct {
	scripted
	granted map[string]string // team -> service
}

func (g *serviceGrant) Covers(c tools.Caller, o operation.Owner) bool {
	return o.Target["service"] != "" && g.granted[c.TenantID] == o.Target["service"]
}

func TestVisibilityIsTenantAndSubjectOrACoveringGrantOrOperator(t *testing.T) {
	plain := &scripted{}
	granted := &serviceGrant{granted: map[string]string{"team-b": "web"}}
	v := tools.NewVisibility(plain)
	own := operation.Owner{Tool: plain.Name(), EndUserID: "alice", TenantID: "M1"}

	assert.True(t, v.CanSee(tools.Caller{UserID: "alice", TenantID: "M1"}, own), "tenant and subject")
	assert.False(t, v.CanSee(tools.Caller{UserID: "alice", TenantID: "M2"}, own), "the same sub in another tenant sees nothing")
	assert.False(t, v.CanSee(tools.Caller{UserID: "alice"}, own), "a token without a tenant sees no tenant's operations")
	tenantless := operation.Owner{Tool: plain.Name(), EndUserID: "alice"}
	assert.True(t, v.CanSee(tools.Caller{UserID: "alice"}, tenantless), "but what it created itself")
	assert.False(t, v.CanSee(tools.Caller{UserID: "alice", TenantID: "M1"}, tenantless), "which no tenant's token sees")
	assert.False(t, v.CanSee(tools.Caller{UserID: "carol", TenantID: "M1"}, own), "a tenant-mate needs a grant that covers the resource")
	assert.True(t, v.CanSee(tools.Caller{UserID: "oscar", Roles: []string{tools.RoleOperator}}, own))
	assert.False(t, v.CanSee(tools.Caller{}, operation.Owner{}), "empty identities never match")

	vg := tools.NewVisibility(granted)
	ticket := operation.Owner{Tool: granted.Name(), EndUserID: "alice", TenantID: "team-a", Target: map[string]string{"service": "web"}}
	assert.True(t, vg.CanSee(tools.Caller{UserID: "bob", TenantID: "team-b"}, ticket), "team-b's grant covers the service")
	assert.False(t, vg.CanSee(tools.Caller{UserID: "carol", TenantID: "team-c"}, ticket))
	assert.False(t, v.CanSee(tools.Caller{UserID: "bob", TenantID: "team-b"}, ticket), "only the operation's own family's grants count")
}
