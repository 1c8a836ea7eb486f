package release

import (
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// Covers is the deploy grant's part of the visibility rule
// (tools.Visibility): a member of a team granted a service sees that
// service's ticket operations, whoever created them. The team could have
// created the same ticket itself, and its deduplicated answer shows it.
func (f *Family) Covers(caller tools.Caller, owner operation.Owner) bool {
	return owner.Tool == ToolCreate && f.grants.CanSeeService(caller.TenantID, owner.Target["service"])
}

var _ tools.GrantCoverage = (*Family)(nil)
