package riskreview

import (
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// Covers is the merchant's part of the visibility rule (tools.Visibility):
// a review was only created after the Risk API confirmed that the
// creator's merchant owns the order, so that merchant's users see the
// order's reviews. Users of any other merchant, including one whose token
// carries the same sub, do not.
func (f *Family) Covers(caller tools.Caller, owner operation.Owner) bool {
	return owner.Tool == ToolRequest && owner.TenantID != "" && owner.TenantID == caller.TenantID
}

var _ tools.GrantCoverage = (*Family)(nil)
