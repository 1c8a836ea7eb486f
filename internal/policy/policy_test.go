package policy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
)

type orders map[string]string

func (o orders) GetOrder(_ context.Context, id string) (provider.Order, error) {
	m, ok := o[id]
	if !ok {
		return provider.Order{}, &provider.Error{Class: provider.ClassNotFound, Op: provider.OpGetOrder, StatusCode: 404}
	}
	return provider.Order{OrderID: id, MerchantID: m}, nil
}

type failing struct{}

func (failing) GetOrder(context.Context, string) (provider.Order, error) {
	return provider.Order{}, &provider.Error{Class: provider.ClassUnknown, Op: provider.OpGetOrder, StatusCode: 503}
}

func TestRiskReviewNeedsTheMerchantToOwnTheOrder(t *testing.T) {
	o := orders{"O20260728001": "M1"}
	cases := []struct {
		name, merchant, order string
		allow                 bool
	}{
		{"owner", "M1", "O20260728001", true},
		{"foreign merchant", "M2", "O20260728001", false},
		{"no merchant claim", "", "O20260728001", false},
		{"order does not exist", "M1", "O20260728999", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := policy.CanRequestRiskReview(context.Background(), o, tc.merchant, tc.order)
			require.NoError(t, err)
			assert.Equal(t, tc.allow, d.Allow, d.Reason)
		})
	}
}

func TestUnreachableOwnerLookupIsAnErrorNotAnAllow(t *testing.T) {
	d, err := policy.CanRequestRiskReview(context.Background(), failing{}, "M1", "O20260728001")
	require.Error(t, err)
	assert.False(t, d.Allow)
}

func TestDeployGrants(t *testing.T) {
	g, err := policy.ParseDeployGrants("team-payments=payments-api,orders-api; team-b=search")
	require.NoError(t, err)
	assert.True(t, g.CanCreateTicket([]string{"deployer"}, "team-payments", "orders-api").Allow)
	assert.False(t, g.CanCreateTicket([]string{"deployer"}, "team-payments", "search").Allow)
	assert.False(t, g.CanCreateTicket([]string{"support"}, "team-payments", "payments-api").Allow)
	assert.False(t, g.CanCreateTicket(nil, "", "payments-api").Allow)
	for _, bad := range []string{"team", "=svc", "team=", "team=a,,b"} {
		_, err := policy.ParseDeployGrants(bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, policy.CanResolve([]string{"operator"}).Allow)
	assert.False(t, policy.CanResolve([]string{"deployer"}).Allow)
}

func TestCanApproveRolloutNeedsAGrantedDeployerOrAnOperator(t *testing.T) {
	g := policy.DeployGrants{"team-payments": {"payments-api"}, "team-billing": {"billing-api"}}
	for _, tc := range []struct {
		name    string
		roles   []string
		team    string
		service string
		allow   bool
	}{
		{"deployer of the owning team", []string{"deployer"}, "team-payments", "payments-api", true},
		{"operator of any team", []string{"operator"}, "sre", "payments-api", true},
		{"tenant-mate without roles", nil, "team-payments", "payments-api", false},
		{"tenant-mate with another role", []string{"support"}, "team-payments", "payments-api", false},
		{"deployer of another team", []string{"deployer"}, "team-billing", "payments-api", false},
		{"deployer without a service", []string{"deployer"}, "team-payments", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := g.CanApproveRollout(tc.roles, tc.team, tc.service)
			assert.Equal(t, tc.allow, d.Allow, d.Reason)
			assert.NotEmpty(t, d.Reason)
		})
	}
}

type refusing struct {
	status int
	code   string
}

func (r refusing) GetOrder(context.Context, string) (provider.Order, error) {
	return provider.Order{}, &provider.Error{Class: provider.ClassRejected, Op: provider.OpGetOrder, StatusCode: r.status, Code: r.code}
}

// A 401 or 403 on the owner lookup refuses this service's own key (rotated,
// revoked): it says nothing about the order or the merchant, so it must not
// be answered as "order not found" (FORBIDDEN, retry_allowed false), which
// would tell every agent its permission is missing for good.
func TestOurOwnKeyRefusedOnTheOwnerLookupIsAnErrorNotADeny(t *testing.T) {
	for _, status := range []int{401, 403} {
		d, err := policy.CanRequestRiskReview(context.Background(), refusing{status, "unauthorized"}, "M1", "O20260728001")
		require.Error(t, err, "status %d", status)
		assert.False(t, d.Allow)
	}
	for _, r := range []refusing{{0, provider.CodeInvalidInput}, {400, "invalid_request"}} {
		d, err := policy.CanRequestRiskReview(context.Background(), r, "M1", "..")
		require.NoError(t, err, "an order id refused as malformed is the caller's, and denied")
		assert.False(t, d.Allow)
	}
}
