package riskapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/provider/providertest"
	"github.com/intentgate/intentgate/internal/sim/internal/simtest"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

func TestSameRequestKeyTwiceCreatesOneReview(t *testing.T) {
	f := newFixture(t, time.Second)
	ctx := context.Background()

	first, err := f.client.CreateReview(ctx, "op-1", input("O20260728001"))
	require.NoError(t, err)
	second, err := f.client.CreateReview(ctx, "op-1", input("O20260728001"))
	require.NoError(t, err)

	assert.Equal(t, "rv-000001", first.ReviewID)
	assert.False(t, first.Replayed)
	assert.True(t, second.Replayed)
	assert.Equal(t, first.ReviewID, second.ReviewID)
	assert.Equal(t, "OPEN", first.Status)

	stats := f.sim.Stats()
	assert.Equal(t, 2, stats.CreateCalls)
	assert.Equal(t, 1, stats.ReviewsCommitted)
	assert.Equal(t, map[string]int{"O20260728001": 1}, stats.ReviewsByOrder)
}

func TestDifferentRequestKeysCreateDifferentReviews(t *testing.T) {
	f := newFixture(t, time.Second)
	ctx := context.Background()
	a, err := f.client.CreateReview(ctx, "op-a", input("O20260728001"))
	require.NoError(t, err)
	b, err := f.client.CreateReview(ctx, "op-b", input("O20260728001"))
	require.NoError(t, err)
	assert.NotEqual(t, a.ReviewID, b.ReviewID)
	assert.Equal(t, map[string]int{"O20260728001": 2}, f.sim.Stats().ReviewsByOrder)
}

func TestConcurrentSameKeyCreatesCommitOnce(t *testing.T) {
	f := newFixture(t, 2*time.Second)
	ids := make(chan string, 10)
	for range 10 {
		go func() {
			r, err := f.client.CreateReview(context.Background(), "op-race", input("O20260728002"))
			if err != nil {
				ids <- "error: " + err.Error()
				return
			}
			ids <- r.ReviewID
		}()
	}
	seen := map[string]int{}
	for range 10 {
		seen[<-ids]++
	}
	assert.Len(t, seen, 1, "every caller must get the same review: %v", seen)
	assert.Equal(t, 1, f.sim.Stats().ReviewsCommitted)
}

func TestCreateWithoutIdempotencyKeyIsBadRequest(t *testing.T) {
	f := newFixture(t, time.Second)
	status, body := simtest.Raw(t, f.server, http.MethodPost, "/reviews", http.Header{"X-Api-Key": {testKey}},
		map[string]string{"order_id": "O20260728001", "reason": "r", "review_type": "fraud"})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.JSONEq(t, `{"error":"missing_idempotency_key","message":"Idempotency-Key header is required (1-255 bytes)"}`, string(body))
	assert.Zero(t, f.sim.Stats().ReviewsCommitted)
}

func TestCreateForUnknownOrderIsNotFoundAndCommitsNothing(t *testing.T) {
	f := newFixture(t, time.Second)
	status, body := simtest.Raw(t, f.server, http.MethodPost, "/reviews",
		http.Header{"X-Api-Key": {testKey}, "Idempotency-Key": {"op-x"}},
		map[string]string{"order_id": "O99999999999", "reason": "r", "review_type": "fraud"})
	assert.Equal(t, http.StatusNotFound, status)
	var e struct{ Error string }
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Equal(t, "order_not_found", e.Error)

	_, err := f.client.CreateReview(context.Background(), "op-x", input("O99999999999"))
	perr := providertest.RequireClass(t, provider.ClassRejected, err)
	assert.Equal(t, "order_not_found", perr.Code)
	assert.Zero(t, f.sim.Stats().ReviewsCommitted)
}

func TestRequestsWithoutTheServiceKeyAreUnauthorized(t *testing.T) {
	f := newFixture(t, time.Second)
	for name, header := range map[string]http.Header{
		"missing": {},
		"wrong":   {"X-Api-Key": {"not-the-key"}},
	} {
		t.Run(name, func(t *testing.T) {
			status, _ := simtest.Raw(t, f.server, http.MethodGet, "/orders/O20260728001", header, nil)
			assert.Equal(t, http.StatusUnauthorized, status)
		})
	}
	status, _ := simtest.Raw(t, f.server, http.MethodGet, "/_sim/stats", nil, nil)
	assert.Equal(t, http.StatusOK, status, "control endpoints need no key")
}

func TestForeignAuthorizationHeaderIsRecorded(t *testing.T) {
	f := newFixture(t, time.Second)
	_, err := f.client.GetOrder(context.Background(), "O20260728001")
	require.NoError(t, err)
	assert.False(t, f.sim.Stats().ForeignAuthorizationSeen, "the provider client must not send Authorization")

	simtest.Raw(t, f.server, http.MethodGet, "/orders/O20260728001",
		http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer caller-token"}}, nil)
	assert.True(t, f.sim.Stats().ForeignAuthorizationSeen)
}

func TestOrdersAreSeededByMerchant(t *testing.T) {
	f := newFixture(t, time.Second)
	for order, merchant := range map[string]string{
		"O20260728001": "M1", "O20260728050": "M1", "O20260728051": "M2", "O20260728100": "M2",
	} {
		got, err := f.client.GetOrder(context.Background(), order)
		require.NoError(t, err)
		assert.Equal(t, provider.Order{OrderID: order, MerchantID: merchant}, got)
	}
	_, err := f.client.GetOrder(context.Background(), "O20260728101")
	providertest.RequireClass(t, provider.ClassNotFound, err)
}

func TestDropResponseAfterCommitCommitsButAnswersNothing(t *testing.T) {
	f := newFixture(t, time.Second)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))

	_, err := f.client.CreateReview(context.Background(), "op-drop", input("O20260728003"))
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Zero(t, perr.StatusCode)
	assert.Equal(t, 1, f.sim.Stats().ReviewsCommitted)

	found, ok, err := f.client.FindReviewByRequestKey(context.Background(), "op-drop")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "O20260728003", found.OrderID)

	again, err := f.client.CreateReview(context.Background(), "op-drop", input("O20260728003"))
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, found.ReviewID, again.ReviewID)
	assert.Equal(t, 1, f.sim.Stats().ReviewsCommitted)
}

func TestTimeoutBeforeCommitHoldsUntilTheClientLeavesAndCommitsNothing(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))

	_, err := f.client.CreateReview(context.Background(), "op-slow", input("O20260728004"))
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.ErrorIs(t, perr, context.DeadlineExceeded)

	_, found, err := f.client.FindReviewByRequestKey(context.Background(), "op-slow")
	require.NoError(t, err)
	assert.False(t, found)
	assert.Zero(t, f.sim.Stats().ReviewsCommitted)
}

func TestServerErrorsBeforeAndAfterCommit(t *testing.T) {
	for _, tc := range []struct {
		mode      riskapi.CreateMode
		committed int
	}{
		{riskapi.CreateError500BeforeCommit, 0},
		{riskapi.CreateError500AfterCommit, 1},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			f := newFixture(t, time.Second)
			require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: tc.mode, Times: 1}}}))
			_, err := f.client.CreateReview(context.Background(), "op-500", input("O20260728005"))
			perr := providertest.RequireClass(t, provider.ClassUnknown, err)
			assert.Equal(t, http.StatusInternalServerError, perr.StatusCode)
			assert.Equal(t, tc.committed, f.sim.Stats().ReviewsCommitted)
		})
	}
}

func TestRejectAnswers422AndCommitsNothing(t *testing.T) {
	f := newFixture(t, time.Second)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateReject, Times: 1}}}))
	_, err := f.client.CreateReview(context.Background(), "op-rej", input("O20260728006"))
	perr := providertest.RequireClass(t, provider.ClassRejected, err)
	assert.Equal(t, http.StatusUnprocessableEntity, perr.StatusCode)
	assert.Equal(t, "rejected", perr.Code)
	assert.Zero(t, f.sim.Stats().ReviewsCommitted)
}

func TestFaultQueueIsConsumedInOrder(t *testing.T) {
	f := newFixture(t, time.Second)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{
		{Mode: riskapi.CreateError500BeforeCommit, Times: 2},
		{Mode: riskapi.CreateReject, Times: 1},
	}}))
	var classes []provider.Class
	for i := range 4 {
		_, err := f.client.CreateReview(context.Background(), fmt.Sprintf("op-q%d", i), input("O20260728007"))
		classes = append(classes, provider.ClassOf(err))
	}
	assert.Equal(t, []provider.Class{provider.ClassUnknown, provider.ClassUnknown, provider.ClassRejected, provider.ClassNone}, classes)
	stats := f.sim.Stats()
	assert.Equal(t, 4, stats.CreateCalls)
	assert.Equal(t, 1, stats.ReviewsCommitted)
}

func TestLookupFaults(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	_, err := f.client.CreateReview(context.Background(), "op-l", input("O20260728008"))
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Lookup: []riskapi.LookupFault{
		{Mode: riskapi.LookupTimeout, Times: 1},
		{Mode: riskapi.LookupError500, Times: 1},
	}}))

	_, _, err = f.client.FindReviewByRequestKey(context.Background(), "op-l")
	providertest.RequireClass(t, provider.ClassUnknown, err)
	_, _, err = f.client.FindReviewByRequestKey(context.Background(), "op-l")
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, http.StatusInternalServerError, perr.StatusCode)
	_, found, err := f.client.FindReviewByRequestKey(context.Background(), "op-l")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, 3, f.sim.Stats().LookupCalls)
}

func TestLatencyDoesNotStopACommitWhoseClientGaveUp(t *testing.T) {
	f := newFixture(t, 50*time.Millisecond)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{LatencyMS: 200}))

	_, err := f.client.CreateReview(context.Background(), "op-late", input("O20260728009"))
	providertest.RequireClass(t, provider.ClassUnknown, err)

	require.Eventually(t, func() bool { return f.sim.Stats().ReviewsCommitted == 1 },
		2*time.Second, 10*time.Millisecond, "a slow provider still commits after the caller left")
}

func TestMaxInFlightIsMeasured(t *testing.T) {
	f := newFixture(t, 2*time.Second)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{LatencyMS: 100}))
	done := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := f.client.CreateReview(context.Background(), fmt.Sprintf("op-m%d", i), input("O20260728010"))
			done <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-done)
	}
	stats := f.sim.Stats()
	assert.GreaterOrEqual(t, stats.MaxInFlight, 1)
	assert.LessOrEqual(t, stats.MaxInFlight, 3)
}

func TestStatsHaveExactlyTheContractFields(t *testing.T) {
	f := newFixture(t, time.Second)
	_, err := f.client.CreateReview(context.Background(), "op-s", input("O20260728011"))
	require.NoError(t, err)

	status, body := simtest.Raw(t, f.server, http.MethodGet, "/_sim/stats", nil, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, []string{"create_calls", "foreign_authorization_seen", "lookup_calls", "max_in_flight", "reviews_by_order", "reviews_committed"}, simtest.Fields(t, body))
	assert.JSONEq(t, `{"create_calls":1,"reviews_committed":1,"reviews_by_order":{"O20260728011":1},"lookup_calls":0,"max_in_flight":1,"foreign_authorization_seen":false}`, string(body))
}

func TestFaultsAreSetOverHTTP(t *testing.T) {
	f := newFixture(t, time.Second)
	status, _ := simtest.Raw(t, f.server, http.MethodPost, "/_sim/faults", nil,
		map[string]any{"create": []map[string]any{{"mode": "drop_response_after_commit", "times": 1}}, "replace": true})
	require.Equal(t, http.StatusOK, status)
	_, err := f.client.CreateReview(context.Background(), "op-h", input("O20260728012"))
	providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, 1, f.sim.Stats().ReviewsCommitted)

	for name, body := range map[string]any{
		"unknown mode":  map[string]any{"create": []map[string]any{{"mode": "explode", "times": 1}}},
		"zero times":    map[string]any{"lookup": []map[string]any{{"mode": "timeout", "times": 0}}},
		"unknown field": map[string]any{"latency": 5},
		"append":        map[string]any{"replace": false},
	} {
		t.Run(name, func(t *testing.T) {
			status, _ := simtest.Raw(t, f.server, http.MethodPost, "/_sim/faults", nil, body)
			assert.Equal(t, http.StatusBadRequest, status)
		})
	}
}

func TestPostingFaultsReplacesTheQueue(t *testing.T) {
	f := newFixture(t, time.Second)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateReject, Times: 5}}}))
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{}))
	_, err := f.client.CreateReview(context.Background(), "op-r", input("O20260728013"))
	require.NoError(t, err)
}

func TestResetClearsReviewsFaultsAndCounters(t *testing.T) {
	f := newFixture(t, time.Second)
	first, err := f.client.CreateReview(context.Background(), "op-z", input("O20260728014"))
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateReject, Times: 1}}, LatencyMS: 10}))
	simtest.Raw(t, f.server, http.MethodGet, "/orders/O20260728001", http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer x"}}, nil)

	status, _ := simtest.Raw(t, f.server, http.MethodPost, "/_sim/reset", nil, nil)
	require.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, riskapi.Stats{ReviewsByOrder: map[string]int{}}, f.sim.Stats())

	_, found, err := f.client.FindReviewByRequestKey(context.Background(), "op-z")
	require.NoError(t, err)
	assert.False(t, found)
	again, err := f.client.CreateReview(context.Background(), "op-z", input("O20260728014"))
	require.NoError(t, err, "the reject fault was cleared")
	assert.False(t, again.Replayed)
	assert.NotEqual(t, first.ReviewID, again.ReviewID, "ids are never reused")
	_, err = f.client.GetOrder(context.Background(), "O20260728014")
	require.NoError(t, err, "orders stay seeded")
}

func TestGetReviewReadsByID(t *testing.T) {
	f := newFixture(t, time.Second)
	created, err := f.client.CreateReview(context.Background(), "op-g", input("O20260728015"))
	require.NoError(t, err)
	got, err := f.client.GetReview(context.Background(), created.ReviewID)
	require.NoError(t, err)
	assert.Equal(t, created.ReviewID, got.ReviewID)
	assert.Equal(t, "op-g", got.RequestKey)
	_, err = f.client.GetReview(context.Background(), "rv-999999")
	providertest.RequireClass(t, provider.ClassNotFound, err)
}
