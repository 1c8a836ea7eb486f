// Package release is the deployment-ticket tool family: create a
// deployment ticket for a service, commit and environment exactly once.
//
// The Release API has no idempotency and no lookup by request key: a lost
// response can only be reconciled by searching for the exact intended
// effect, and that search lags. So a create answer is confirmed by an
// authoritative read (Verify), and a zero-match search proves absence only
// when its watermark covers the whole dispatch (Probe).
package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/tools"
)

// Tool names of this family.
const (
	ToolCreate  = "create_deployment_ticket"
	ToolApprove = "approve_rollout"
)

// BusinessKeyKind names deployment-ticket business keys.
const BusinessKeyKind = "deployment_ticket"

// ProbeSource is the reconciliation check source shown in the journal.
const ProbeSource = "release_provider"

// The arguments' alphabets as the input schema states them; their lengths
// (argumentLengths) are checked apart. Prepare checks them with
// lowerSlug and lowerHex, not compiled expressions: compiling one at
// package init cost every cold start, and a test keeps each function
// equal to its pattern.
const (
	servicePattern     = `^[a-z][a-z0-9-]*$`
	commitPattern      = `^[0-9a-f]*$`
	environmentPattern = `^[a-z][a-z0-9-]*$`
)

// lowerSlug: a lowercase letter, then lowercase letters, digits and '-'
// (servicePattern, environmentPattern).
func lowerSlug(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// lowerHex: lowercase hex digits only (commitPattern).
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// commitShape is how a refused commit is described.
const commitShape = "the full commit id, 40 lowercase hex digits: an abbreviation is refused, since two spellings of one commit would make two tickets (git rev-parse gives the full id)"

// argumentLength is the inclusive length range of one argument.
type argumentLength struct{ min, max int }

var (
	serviceLength = argumentLength{2, 63}
	// A full commit id. An abbreviation is refused: one commit spelled two
	// ways would be two business keys, and so two tickets for one service,
	// commit and environment. (Git's SHA-256 object format, 64 digits, is
	// not taken: the Release API and the hosts it serves name commits by
	// SHA-1.)
	commitLength      = argumentLength{40, 40}
	environmentLength = argumentLength{2, 32}
)

// ReleaseAPI is the part of the Release API contract this family uses
// (provider.ReleaseClient implements it).
type ReleaseAPI interface {
	CreateTicket(ctx context.Context, in provider.TicketInput) (provider.Ticket, error)
	GetTicket(ctx context.Context, ticketID string) (provider.Ticket, error)
	SearchTickets(ctx context.Context, target provider.TicketTarget) (provider.SearchResult, error)
}

// DefaultSettleWindow is the default time after a dispatch before the first
// probe. It must exceed the provider's search lag plus CommitAllowance, or
// early probes are merely inconclusive (never wrong: Probe checks the
// watermark itself) and spend the probe budget.
const DefaultSettleWindow = 5 * time.Second

// DefaultRecovery is the family's reconciliation policy. Retries are capped
// at one even though a retry is only ever claimed after an authoritative
// absence: this provider cannot deduplicate, so every re-send is a risk.
func DefaultRecovery() tools.Recovery {
	return tools.Recovery{SettleWindow: DefaultSettleWindow, ProbeBudget: 6, MaxAge: 10 * time.Minute, RetryBudget: 1,
		IdempotentCreate: false, CommitDeadline: true}
}

// RecoveryForLag is DefaultRecovery with a settle window that exceeds the
// given search lag (plus CommitAllowance and a second of slack), never
// shorter than DefaultSettleWindow.
func RecoveryForLag(searchLag time.Duration) tools.Recovery {
	r := DefaultRecovery()
	if w := searchLag + CommitAllowance + time.Second; w > r.SettleWindow {
		r.SettleWindow = w
	}
	return r
}

// Family implements tools.WriteTool for deployment tickets.
type Family struct {
	api      ReleaseAPI
	grants   policy.DeployGrants
	recovery tools.Recovery
}

var _ tools.WriteTool = (*Family)(nil)

// New builds the family.
func New(api ReleaseAPI, grants policy.DeployGrants, recovery tools.Recovery) *Family {
	return &Family{api: api, grants: grants, recovery: recovery}
}

// Name is the MCP tool name.
func (f *Family) Name() string { return ToolCreate }

// Recovery is the reconciliation policy.
func (f *Family) Recovery() tools.Recovery { return f.recovery }

// Args are create_deployment_ticket's arguments.
type Args struct {
	Service     string `json:"service"`
	Commit      string `json:"commit"`
	Environment string `json:"environment"`
	OperationID string `json:"operation_id,omitempty"`
}

// Prepare validates the arguments and derives the business key.
func (f *Family) Prepare(_ context.Context, _ tools.Caller, raw json.RawMessage) (tools.Prepared, error) {
	var a Args
	if err := decodeStrict(raw, &a); err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "arguments: %v", err)
	}
	for _, c := range []struct {
		name, value string
		matches     func(string) bool
		length      argumentLength
		shape       string
	}{
		{"service", a.Service, lowerSlug, serviceLength, "2-63 characters of a-z 0-9 -, starting with a letter"},
		{"commit", a.Commit, lowerHex, commitLength, commitShape},
		{"environment", a.Environment, lowerSlug, environmentLength, "2-32 characters of a-z 0-9 -, starting with a letter"},
	} {
		if len(c.value) < c.length.min || len(c.value) > c.length.max || !c.matches(c.value) {
			return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%s must be %s", c.name, c.shape)
		}
	}

	if a.OperationID != "" {
		if err := operation.ValidateOperationID(a.OperationID); err != nil {
			return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
		}
	}
	bk, err := operation.NewBusinessKey(BusinessKeyKind, a.Service, a.Commit, a.Environment)
	if err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
	}
	target := map[string]string{"service": a.Service, "commit": a.Commit, "environment": a.Environment}
	return tools.Prepared{
		OperationID: a.OperationID,
		BusinessKey: bk,
		Target:      target,
		Payload:     map[string]string{"service": a.Service, "commit": a.Commit, "environment": a.Environment},
		// Every target field: the same operation_id with another commit,
		// service or environment is an idempotency conflict.
		DigestArgs: map[string]string{"service": a.Service, "commit": a.Commit, "environment": a.Environment},
	}, nil
}

// decodeStrict decodes exactly one JSON object with no unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the arguments object")
	}
	return nil
}

// Authorize: a deployer may create tickets only for services granted to
// the team in their token. Nothing is stored or sent before this.
func (f *Family) Authorize(_ context.Context, caller tools.Caller, p tools.Prepared) error {
	d := f.grants.CanCreateTicket(caller.Roles, caller.TenantID, p.Target["service"])
	if !d.Allow {
		return tools.Fail(tools.CodeForbidden, false, nil, "no permission to create deployment tickets for this service (%s); nothing was sent", d.Reason)
	}
	return nil
}

// Dispatch creates the ticket. The provider takes no request key: a
// ClassUnknown error must be reconciled by Probe, never by sending again.
// The create carries the grant's commit deadline when the provider honours
// one, so a late commit is bounded.
func (f *Family) Dispatch(ctx context.Context, op operation.Operation) (tools.Effect, error) {
	in := provider.TicketInput{
		Service: op.Payload["service"], Commit: op.Payload["commit"], Environment: op.Payload["environment"],
		RequestedBy: op.EndUserID,
	}
	if f.recovery.CommitDeadline {
		in.CommitDeadline = op.DispatchDeadline()
	}
	t, err := f.api.CreateTicket(ctx, in)
	if err != nil {
		return tools.Effect{}, fmt.Errorf("create ticket: %w", err)
	}
	return tools.Effect{ResourceID: t.TicketID}, nil
}

// ErrNotConfirmed: the authoritative read did not show the ticket the
// create reported, with exactly the intended target. It is the family's
// tools.ErrNotConfirmed, which operator resolutions look for.
var ErrNotConfirmed = fmt.Errorf("ticket not confirmed by the authoritative read: %w", tools.ErrNotConfirmed)

// Verify treats the create answer as weak evidence and confirms it with the
// authoritative read. Any error leaves the operation UNKNOWN
// (verification_inconclusive) for the reconciler.
func (f *Family) Verify(ctx context.Context, op operation.Operation, e tools.Effect) error {
	if e.ResourceID == "" {
		return fmt.Errorf("verify: create reported no ticket id: %w", ErrNotConfirmed)
	}
	if _, err := f.confirm(ctx, op, e.ResourceID); err != nil {
		return fmt.Errorf("verify %s: %w", e.ResourceID, err)
	}
	return nil
}

// confirm reads ticketID authoritatively and checks it is this operation's
// intended effect. A ticket that does not exist or is for another target
// is ErrNotConfirmed; a failed read is returned as is.
func (f *Family) confirm(ctx context.Context, op operation.Operation, ticketID string) (provider.Ticket, error) {
	t, err := f.api.GetTicket(ctx, ticketID)
	if provider.ClassOf(err) == provider.ClassNotFound {
		return provider.Ticket{}, fmt.Errorf("get ticket: %w: %w", ErrNotConfirmed, err)
	}
	if err != nil {
		return provider.Ticket{}, fmt.Errorf("get ticket: %w", err)
	}
	if t.Target() != targetOf(op) {
		return provider.Ticket{}, fmt.Errorf("ticket is for %s/%s/%s: %w", t.Service, t.Commit, t.Environment, ErrNotConfirmed)
	}
	return t, nil
}

func targetOf(op operation.Operation) provider.TicketTarget {
	return provider.TicketTarget{Service: op.Target["service"], Commit: op.Target["commit"], Environment: op.Target["environment"]}
}
