// Package policy makes object-level authorization decisions: may this end
// user act on this object? Decisions use only trusted identity (token
// claims) and the system of record, never tool arguments about who the
// caller is.
package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/intentgate/intentgate/internal/provider"
)

// Decision is an authorization answer with the reason recorded in audit.
type Decision struct {
	Allow  bool
	Reason string
}

func allow(reason string) Decision { return Decision{Allow: true, Reason: reason} }
func deny(reason string) Decision  { return Decision{Reason: reason} }

// Orders is where order ownership is looked up (the Risk API contract).
type Orders interface {
	GetOrder(ctx context.Context, orderID string) (provider.Order, error)
}

// CanRequestRiskReview: the end user's merchant must own the order. An order
// that does not exist is denied like a foreign one, so the answer reveals
// nothing about other merchants' orders. An error means the owner could not
// be established: the caller must not proceed.
func CanRequestRiskReview(ctx context.Context, orders Orders, merchantID, orderID string) (Decision, error) {
	if merchantID == "" {
		return deny("token carries no merchant"), nil
	}
	order, err := orders.GetOrder(ctx, orderID)
	if provider.ClassOf(err) == provider.ClassNotFound || (provider.ClassOf(err) == provider.ClassRejected && !credentialsRefused(err)) {
		return deny("order not found"), nil
	}
	if err != nil {
		return Decision{}, fmt.Errorf("policy: look up owner of %s: %w", orderID, err)
	}
	if order.MerchantID != merchantID {
		return deny("order belongs to another merchant"), nil
	}
	return allow("merchant owns order"), nil
}

// Roles the policies know.
const (
	RoleDeployer = "deployer"
	RoleOperator = "operator"
)

// DeployGrants maps a team (the token's tenant claim) to the services its
// deployers may create tickets for.
type DeployGrants map[string][]string

// ParseDeployGrants reads "team-a=svc1,svc2;team-b=svc3".
func ParseDeployGrants(s string) (DeployGrants, error) {
	grants := DeployGrants{}
	if strings.TrimSpace(s) == "" {
		return grants, nil
	}
	for _, entry := range strings.Split(s, ";") {
		team, services, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || team == "" || services == "" {
			return nil, fmt.Errorf("deploy grants: entry %q is not team=service,service", entry)
		}
		for _, svc := range strings.Split(services, ",") {
			svc = strings.TrimSpace(svc)
			if svc == "" {
				return nil, errors.New("deploy grants: empty service name for team " + team)
			}
			grants[team] = append(grants[team], svc)
		}
	}
	return grants, nil
}

// CanCreateTicket: a deployer of a team may create tickets for its
// team's services only.
func (g DeployGrants) CanCreateTicket(roles []string, team, service string) Decision {
	if !slices.Contains(roles, RoleDeployer) {
		return deny("caller is not a deployer")
	}
	if !slices.Contains(g[team], service) {
		return deny("service not granted to the caller's team")
	}
	return allow("deployer granted service")
}

// CanSeeService: members of a team granted a service may see the
// operations on it (any role; seeing is not approving, see
// CanApproveRollout).
func (g DeployGrants) CanSeeService(team, service string) bool {
	return team != "" && service != "" && slices.Contains(g[team], service)
}

// CanApproveRollout: an operator, or a deployer whose team is granted the
// ticket's service. Seeing a ticket (same tenant) is not enough to approve
// its rollout: a tenant-mate without the deployer role, or a deployer of a
// team that does not own the service, is denied.
func (g DeployGrants) CanApproveRollout(roles []string, team, service string) Decision {
	if slices.Contains(roles, RoleOperator) {
		return allow("operator")
	}
	if !slices.Contains(roles, RoleDeployer) {
		return deny("caller is neither a deployer nor an operator")
	}
	if service == "" || !slices.Contains(g[team], service) {
		return deny("service not granted to the caller's team")
	}
	return allow("deployer granted service")
}

// CanResolve: only operators settle escalated operations.
func CanResolve(roles []string) Decision {
	if slices.Contains(roles, RoleOperator) {
		return allow("operator")
	}
	return deny("caller is not an operator")
}

// credentialsRefused reports a refusal of this service's own key (401, or
// 403 as API Gateway answers a missing or revoked API key): it says
// nothing about the order, so the owner is unknown, not absent.
func credentialsRefused(err error) bool {
	var perr *provider.Error
	return errors.As(err, &perr) && (perr.StatusCode == http.StatusUnauthorized || perr.StatusCode == http.StatusForbidden)
}
