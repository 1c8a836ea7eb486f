package riskreview_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

func TestTheOrdersMerchantSeesItsReviewsAndNoOtherMerchantDoes(t *testing.T) {
	f := riskreview.New(nil, riskreview.DefaultRecovery())
	v := tools.NewVisibility(f)
	review := operation.Owner{Tool: riskreview.ToolRequest, EndUserID: "alice", TenantID: "M1", Target: map[string]string{"order_id": "O1"}}

	assert.True(t, v.CanSee(tools.Caller{UserID: "carol", TenantID: "M1"}, review), "a user of the merchant that owns the order")
	assert.False(t, v.CanSee(tools.Caller{UserID: "alice", TenantID: "M2"}, review), "the same sub at another merchant")
	assert.False(t, v.CanSee(tools.Caller{UserID: "carol"}, review), "no merchant in the token")
	assert.False(t, f.Covers(tools.Caller{UserID: "carol", TenantID: "M1"}, operation.Owner{Tool: "create_deployment_ticket", TenantID: "M1"}),
		"the merchant grant covers reviews only")
}
