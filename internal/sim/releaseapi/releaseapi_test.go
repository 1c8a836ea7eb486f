package releaseapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/provider/providertest"
	"github.com/intentgate/intentgate/internal/sim/internal/simtest"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

func TestCreateHasNoDedupe(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	first, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	second, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)

	assert.Equal(t, "ticket-9001", first.TicketID)
	assert.Equal(t, "ticket-9002", second.TicketID)
	assert.Equal(t, f.clock.Now(), first.CreatedAt)
	stats := f.sim.Stats()
	assert.Equal(t, 2, stats.CreateCalls)
	assert.Equal(t, 2, stats.TicketsCommitted)
	assert.Equal(t, map[string]int{paymentsTarget: 2}, stats.TicketsByTarget)
}

func TestSearchLagHidesFreshTicketsAndTheWatermarkMoves(t *testing.T) {
	f := newFixture(t, time.Second, time.Second)
	created, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	dispatchedBy := f.clock.Now()

	early, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Empty(t, early.Tickets)
	assert.True(t, early.Complete)
	assert.Equal(t, dispatchedBy.Add(-time.Second), early.IndexedThrough)
	assert.False(t, early.Covers(dispatchedBy), "a zero before the watermark passes the dispatch proves nothing")

	f.clock.Advance(time.Second)
	late, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	require.Len(t, late.Tickets, 1)
	assert.Equal(t, created.TicketID, late.Tickets[0].TicketID)
	assert.Equal(t, dispatchedBy, late.IndexedThrough)
	assert.True(t, late.Covers(dispatchedBy))
	assert.Equal(t, 2, f.sim.Stats().SearchCalls)
}

func TestSearchFiltersExactlyByTarget(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	other := payments
	other.Environment = "staging"
	_, err := f.client.CreateTicket(context.Background(), other)
	require.NoError(t, err)
	result, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Empty(t, result.Tickets)
	assert.True(t, result.Covers(f.clock.Now()))
}

func TestGetTicketIsAuthoritativeDuringLag(t *testing.T) {
	f := newFixture(t, time.Hour, time.Second)
	created, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	got, err := f.client.GetTicket(context.Background(), created.TicketID)
	require.NoError(t, err)
	assert.Equal(t, created, got)
	_, err = f.client.GetTicket(context.Background(), "ticket-1")
	providertest.RequireClass(t, provider.ClassNotFound, err)
	assert.Equal(t, 2, f.sim.Stats().GetCalls)
}

func TestHideAnswersIncomplete(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchHide, Times: 1}}}))

	hidden, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Empty(t, hidden.Tickets)
	assert.False(t, hidden.Complete)
	assert.False(t, hidden.Covers(f.clock.Now().Add(-time.Hour)))

	shown, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Len(t, shown.Tickets, 1)
	assert.True(t, shown.Complete)
}

func TestSearchTimeoutIsUnknown(t *testing.T) {
	f := newFixture(t, 0, 100*time.Millisecond)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Search: []releaseapi.SearchFault{{Mode: releaseapi.SearchTimeout, Times: 1}}}))
	_, err := f.client.SearchTickets(context.Background(), payments.Target())
	providertest.RequireClass(t, provider.ClassUnknown, err)
	_, err = f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
}

func TestCreateFaults(t *testing.T) {
	for _, tc := range []struct {
		mode      releaseapi.CreateMode
		class     provider.Class
		status    int
		committed int
	}{
		{releaseapi.CreateDropResponseAfterCommit, provider.ClassUnknown, 0, 1},
		{releaseapi.CreateDuplicateThenDrop, provider.ClassUnknown, 0, 2},
		{releaseapi.CreateTimeoutBeforeCommit, provider.ClassUnknown, 0, 0},
		{releaseapi.CreateError500BeforeCommit, provider.ClassUnknown, http.StatusInternalServerError, 0},
		{releaseapi.CreateError500AfterCommit, provider.ClassUnknown, http.StatusInternalServerError, 1},
		{releaseapi.CreateReject, provider.ClassRejected, http.StatusUnprocessableEntity, 0},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			f := newFixture(t, 0, 100*time.Millisecond)
			require.NoError(t, f.sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: tc.mode, Times: 1}}}))

			_, err := f.client.CreateTicket(context.Background(), payments)
			perr := providertest.RequireClass(t, tc.class, err)
			assert.Equal(t, tc.status, perr.StatusCode)

			stats := f.sim.Stats()
			assert.Equal(t, 1, stats.CreateCalls)
			assert.Equal(t, tc.committed, stats.TicketsCommitted)
			found, err := f.client.SearchTickets(context.Background(), payments.Target())
			require.NoError(t, err)
			assert.Len(t, found.Tickets, tc.committed, "the search shows exactly what was committed")
		})
	}
}

func TestFaultsAreSetOverHTTP(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	status, body := simtest.Raw(t, f.server, http.MethodPost, "/_sim/faults", nil, map[string]any{
		"create":        []map[string]any{{"mode": "duplicate_then_drop", "times": 1}},
		"search":        []map[string]any{{"mode": "hide", "times": 2}},
		"search_lag_ms": 1500,
	})
	require.Equal(t, http.StatusOK, status, string(body))

	_, err := f.client.CreateTicket(context.Background(), payments)
	providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, map[string]int{paymentsTarget: 2}, f.sim.Stats().TicketsByTarget)

	result, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.False(t, result.Complete)
	assert.Equal(t, f.clock.Now().Add(-1500*time.Millisecond), result.IndexedThrough)

	for name, body := range map[string]any{
		"unknown mode":  map[string]any{"search": []map[string]any{{"mode": "vanish", "times": 1}}},
		"negative lag":  map[string]any{"search_lag_ms": -1},
		"unknown field": map[string]any{"lag": 1},
	} {
		t.Run(name, func(t *testing.T) {
			status, _ := simtest.Raw(t, f.server, http.MethodPost, "/_sim/faults", nil, body)
			assert.Equal(t, http.StatusBadRequest, status)
		})
	}
}

func TestOmittedLagRestoresTheConfiguredLag(t *testing.T) {
	f := newFixture(t, time.Minute, time.Second)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchLagMS: intPtr(0)}))
	zero, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now(), zero.IndexedThrough)

	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{}))
	configured, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now().Add(-time.Minute), configured.IndexedThrough)
}

func TestResetClearsTicketsFaultsAndCounters(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	first, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{
		Create:      []releaseapi.CreateFault{{Mode: releaseapi.CreateReject, Times: 1}},
		SearchLagMS: intPtr(60_000),
	}))
	simtest.Raw(t, f.server, http.MethodGet, "/tickets/ticket-9001", http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer x"}}, nil)

	status, _ := simtest.Raw(t, f.server, http.MethodPost, "/_sim/reset", nil, nil)
	require.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, releaseapi.Stats{TicketsByTarget: map[string]int{}, BrokenPromisesByTarget: map[string]int{}}, f.sim.Stats())

	_, err = f.client.GetTicket(context.Background(), first.TicketID)
	providertest.RequireClass(t, provider.ClassNotFound, err)
	again, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err, "the reject fault was cleared")
	assert.Equal(t, "ticket-9002", again.TicketID, "ticket numbers are never reused")
	result, err := f.client.SearchTickets(context.Background(), payments.Target())
	require.NoError(t, err)
	assert.Len(t, result.Tickets, 1, "the configured lag (0) is back")
}

func TestStatsHaveExactlyTheContractFields(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)

	status, body := simtest.Raw(t, f.server, http.MethodGet, "/_sim/stats", nil, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, []string{"broken_promises_by_target", "create_calls", "creates_past_deadline", "foreign_authorization_seen", "get_calls", "late_commits_scheduled", "max_in_flight", "search_calls", "tickets_by_target", "tickets_committed"}, simtest.Fields(t, body))
	assert.JSONEq(t, `{"broken_promises_by_target":{},"create_calls":1,"tickets_committed":1,"tickets_by_target":{"payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu":1},"search_calls":0,"get_calls":0,"max_in_flight":1,"foreign_authorization_seen":false,"late_commits_scheduled":0,"creates_past_deadline":0}`, string(body))
}

func TestServiceKeyAndForeignAuthorization(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	status, _ := simtest.Raw(t, f.server, http.MethodGet, "/tickets?service=x", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _ = simtest.Raw(t, f.server, http.MethodPost, "/tickets", http.Header{"X-Api-Key": {"wrong"}}, map[string]string{})
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Zero(t, f.sim.Stats().TicketsCommitted)

	_, err := f.client.CreateTicket(context.Background(), payments)
	require.NoError(t, err)
	assert.False(t, f.sim.Stats().ForeignAuthorizationSeen)
	simtest.Raw(t, f.server, http.MethodGet, "/tickets/ticket-9001", http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer caller"}}, nil)
	assert.True(t, f.sim.Stats().ForeignAuthorizationSeen)
}

func TestCreateValidatesTheBody(t *testing.T) {
	f := newFixture(t, 0, time.Second)
	status, _ := simtest.Raw(t, f.server, http.MethodPost, "/tickets", http.Header{"X-Api-Key": {testKey}},
		map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", "environment": "production-eu"})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Zero(t, f.sim.Stats().TicketsCommitted)
}
