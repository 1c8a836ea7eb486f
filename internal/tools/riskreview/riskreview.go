// Package riskreview is the risk-review tool family: request a
// risk review for an order the caller's merchant owns, exactly once, and
// query its status by review_id. The Risk API dedupes creates by our
// request key and can be asked by that key, so recovery probes by key.
package riskreview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/tools"
)

// Tool names.
const (
	ToolRequest = "request_risk_review"
	ToolStatus  = "get_risk_review_status"
)

// ReviewType is the only review type offered; the business key names it so
// a second type can be added without colliding with this one.
const ReviewType = "standard"

// Generation is the active review generation of an order. Orders carry no
// generation in the Risk API contract yet, so there is one; a re-review
// after a settled one would need the contract to expose a new generation.
const Generation = "g1"

// MaxReasonRunes bounds the free-text reason.
const MaxReasonRunes = 500

func validOrderID(id string) bool {
	if len(id) != 12 || id[0] != 'O' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}

// RiskAPI is the part of the Risk API contract this family uses.
type RiskAPI interface {
	policy.Orders
	CreateReview(ctx context.Context, requestKey string, in provider.CreateReviewInput) (provider.Review, error)
	FindReviewByRequestKey(ctx context.Context, requestKey string) (provider.Review, bool, error)
}

// DefaultRecovery: the Risk API's lookup by key is consistent, so the settle
// window only covers a create still in flight at the provider.
func DefaultRecovery() tools.Recovery {
	return tools.Recovery{SettleWindow: 2 * time.Second, ProbeBudget: 8, MaxAge: 15 * time.Minute, RetryBudget: 3, IdempotentCreate: true}
}

// Family implements tools.WriteTool for risk reviews.
type Family struct {
	api      RiskAPI
	recovery tools.Recovery
}

// New builds the family.
func New(api RiskAPI, recovery tools.Recovery) *Family {
	return &Family{api: api, recovery: recovery}
}

// Name is the MCP tool name.
func (f *Family) Name() string { return ToolRequest }

// Recovery is the reconciliation policy.
func (f *Family) Recovery() tools.Recovery { return f.recovery }

// Args are request_risk_review's arguments.
type Args struct {
	OrderID     string `json:"order_id"`
	Reason      string `json:"reason"`
	OperationID string `json:"operation_id,omitempty"`
}

// Prepare validates the domain rules the schema cannot express.
func (f *Family) Prepare(_ context.Context, _ tools.Caller, raw json.RawMessage) (tools.Prepared, error) {
	var a Args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "arguments: %v", err)
	}
	if !validOrderID(a.OrderID) {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "order_id must look like O20260728001 (O and 11 digits)")
	}
	reason := strings.TrimSpace(a.Reason)
	if reason == "" || !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxReasonRunes {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "reason must be 1 to %d characters", MaxReasonRunes)
	}
	if strings.ContainsFunc(reason, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "reason must not contain control characters")
	}
	if a.OperationID != "" {
		if err := operation.ValidateOperationID(a.OperationID); err != nil {
			return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
		}
	}
	bk, err := operation.NewBusinessKey("risk_review", a.OrderID, ReviewType, Generation)
	if err != nil {
		return tools.Prepared{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "%v", err)
	}
	return tools.Prepared{
		OperationID: a.OperationID,
		BusinessKey: bk,
		Target:      map[string]string{"order_id": a.OrderID, "review_type": ReviewType},
		Payload:     map[string]string{"order_id": a.OrderID, "reason": reason, "review_type": ReviewType},
		DigestArgs:  map[string]string{"order_id": a.OrderID, "reason": reason},
	}, nil
}

// Authorize: the caller's merchant must own the order.
func (f *Family) Authorize(ctx context.Context, caller tools.Caller, p tools.Prepared) error {
	d, err := policy.CanRequestRiskReview(ctx, f.api, caller.TenantID, p.Target["order_id"])
	if err != nil {
		return tools.Fail(tools.CodeTemporaryUnavailable, true, nil, "order ownership could not be checked; nothing was sent; retry shortly")
	}
	if !d.Allow {
		return tools.Fail(tools.CodeForbidden, false, nil, "no permission to request a review for this order")
	}
	return nil
}

// Dispatch creates the review with the operation's handle as Idempotency-Key.
func (f *Family) Dispatch(ctx context.Context, op operation.Operation) (tools.Effect, error) {
	rv, err := f.api.CreateReview(ctx, op.Handle, provider.CreateReviewInput{
		OrderID: op.Payload["order_id"], Reason: op.Payload["reason"], ReviewType: op.Payload["review_type"],
	})
	if err != nil {
		return tools.Effect{}, fmt.Errorf("create review: %w", err)
	}
	return tools.Effect{ResourceID: rv.ReviewID}, nil
}

// Verify: the Risk API's create answer is keyed by our request key and is
// itself the authoritative record, so there is nothing further to read.
func (f *Family) Verify(context.Context, operation.Operation, tools.Effect) error { return nil }

// Probe looks the review up by request key: a consistent, authoritative read.
func (f *Family) Probe(ctx context.Context, op operation.Operation) (tools.ProbeResult, error) {
	rv, found, err := f.api.FindReviewByRequestKey(ctx, op.Handle)
	if errors.Is(err, provider.ErrMultipleMatches) {
		// The provider broke its own dedupe: an incident, not a guess.
		return tools.ProbeResult{Source: "risk_provider", Matches: []string{"unnamed-1", "unnamed-2"}, Unnamed: true,
			Detail: "provider reports several reviews for one request key, without naming them"}, nil
	}
	if err != nil {
		return tools.ProbeResult{}, fmt.Errorf("find review by request key: %w", err)
	}
	res := tools.ProbeResult{Source: "risk_provider", Authoritative: true, Detail: "lookup by request key"}
	if found {
		res.Matches = []string{rv.ReviewID}
	}
	return res, nil
}
