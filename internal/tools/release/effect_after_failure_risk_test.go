package release_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// keyedRisk: the Risk API's lookup by request key shows one review, created
// with the asked key (so by construction this operation's own effect).
type keyedRisk struct{ reviewID string }

func (keyedRisk) GetOrder(context.Context, string) (provider.Order, error) {
	return provider.Order{OrderID: "O20260728001", MerchantID: "M1"}, nil
}
func (keyedRisk) CreateReview(context.Context, string, provider.CreateReviewInput) (provider.Review, error) {
	return provider.Review{}, fmt.Errorf("unused")
}
func (k keyedRisk) FindReviewByRequestKey(_ context.Context, key string) (provider.Review, bool, error) {
	return provider.Review{ReviewID: k.reviewID, OrderID: "O20260728001", ReviewType: riskreview.ReviewType, RequestKey: key, Status: "OPEN"}, true, nil
}

// A Risk API operation's probe looks reviews up by its own request key, so
// every match is its own effect: one still there, even not the one
// reported (a later request of it committed another), keeps it open.
func TestARiskReviewOperationIsNotClosedWhileAReviewUnderItsOwnKeyExists(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	family := riskreview.New(keyedRisk{reviewID: "rv-000002"}, riskreview.DefaultRecovery())
	op := failedRiskReview(t, f, "review-close-0001", operation.EventBusinessRejected)
	require.Equal(t, []string{"rv-000001"}, op.EffectsReportedAfterFailure())

	res, err := family.Probe(ctx, op)
	require.NoError(t, err)
	require.Equal(t, []string{"rv-000002"}, res.Matches, "a review under this operation's own request key")

	_, err = operatortools.Resolve(ctx, f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "removed rv-000001", EffectsRemoved: true, LateCommitsRuledOut: true})
	fail := requireFailure(t, err, "PRECONDITION_FAILED")
	assert.Contains(t, fail.Message, "rv-000002")
}

// insertedRiskReview records alice's Risk API operation for O20260728001
// under opID, as an insert does (PENDING), without sending it.
func insertedRiskReview(t *testing.T, f fixture, opID string) operation.Operation {
	t.Helper()
	key, err := operation.NewRequestKey("support-assistant", "M1", "alice", riskreview.ToolRequest, opID)
	require.NoError(t, err)
	target := map[string]string{"order_id": "O20260728001", "review_type": riskreview.ReviewType}
	bk, err := operation.NewBusinessKey("risk_review", "O20260728001", riskreview.ReviewType, riskreview.Generation)
	require.NoError(t, err)
	digest, err := operation.RequestDigest(riskreview.ToolRequest, "alice", target)
	require.NoError(t, err)
	op, err := operation.New(operation.Intent{Key: key, BusinessKey: bk, RequestDigest: digest, EndUserID: "alice",
		TenantID: "M1", Target: target, Payload: target}, f.clock.Now(), time.Minute)
	require.NoError(t, err)
	_, err = f.st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	return op
}

// failedRiskReview records a Risk API operation for O20260728001 under
// opID that went FAILED by path and then had rv-000001 reported.
func failedRiskReview(t *testing.T, f fixture, opID string, path ...operation.EventType) operation.Operation {
	t.Helper()
	ctx := context.Background()
	op := insertedRiskReview(t, f, opID)
	var err error
	for _, ev := range path {
		op, err = f.st.Transition(ctx, op, operation.Event{Type: ev, At: f.clock.Now()})
		require.NoError(t, err, ev)
	}
	op, err = f.st.Transition(ctx, op, operation.Event{Type: operation.EventEvidenceRecorded, At: f.clock.Now(),
		Source: "stale_dispatcher", ResourceID: "rv-000001"})
	require.NoError(t, err)
	return op
}

type emptyRisk struct{ keyedRisk }

func (emptyRisk) FindReviewByRequestKey(context.Context, string) (provider.Review, bool, error) {
	return provider.Review{}, false, nil
}

// The reported effect proves the provider committed after the operation
// was recorded FAILED. Before callers are invited to ask again, no other
// request of it may still commit: bounded by the provider's promise, or,
// for the Risk API, which promises no deadline, stated by the operator
// (late_commits_ruled_out), as for FAILED from ESCALATED.
func TestClosingAnEffectReportedAfterFailureRulesOutAnotherLateCommitFirst(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	family := riskreview.New(emptyRisk{}, riskreview.DefaultRecovery())
	op := failedRiskReview(t, f, "review-close-0002", operation.EventBusinessRejected)
	_, err := operatortools.Resolve(ctx, f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "removed rv-000001", EffectsRemoved: true})
	fail := requireFailure(t, err, "PRECONDITION_FAILED")
	assert.Contains(t, fail.Message, "late_commits_ruled_out")
	closed, err := operatortools.Resolve(ctx, f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "removed; provider confirms nothing else in flight", EffectsRemoved: true, LateCommitsRuledOut: true})
	require.NoError(t, err)
	assert.Empty(t, closed.EffectsReportedAfterFailure())
}

// The report disproves the journal: a request the journal said never left
// did reach the provider, so the journal cannot rule out another late
// commit either; closing takes the operator's statement.
func TestClosingDoesNotTrustAJournalTheReportedEffectDisproves(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	family := riskreview.New(emptyRisk{}, riskreview.DefaultRecovery())
	op := failedRiskReview(t, f, "review-close-0009", operation.EventNotDispatched, operation.EventClientCancelled)
	require.True(t, op.LateCommitsRuledOut(), "the journal still claims nothing left")
	_, err := operatortools.Resolve(ctx, f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "removed rv-000001", EffectsRemoved: true})
	fail := requireFailure(t, err, "PRECONDITION_FAILED")
	assert.Contains(t, fail.Message, "late_commits_ruled_out")
}
