package provider_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/provider/providertest"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

var ticket = provider.TicketInput{Service: "payments-api", Commit: "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", Environment: "production-eu", RequestedBy: "cc-run-3188"}

func TestReleaseCreateAndReads(t *testing.T) {
	_, url := startRelease(t)
	c := releaseClient(t, url, time.Second)
	created, err := c.CreateTicket(context.Background(), ticket)
	require.NoError(t, err)
	assert.Equal(t, ticket.Target(), created.Target())
	assert.Equal(t, "OPEN", created.Status)

	got, err := c.GetTicket(context.Background(), created.TicketID)
	require.NoError(t, err)
	assert.Equal(t, created, got)

	_, err = c.GetTicket(context.Background(), "ticket-0")
	perr := providertest.RequireClass(t, provider.ClassNotFound, err)
	assert.Equal(t, "ticket_not_found", perr.Code)

	result, err := c.SearchTickets(context.Background(), ticket.Target())
	require.NoError(t, err)
	require.Len(t, result.Tickets, 1)
	assert.True(t, result.Covers(created.CreatedAt))
}

func TestReleaseCreateFaultsAreUnknown(t *testing.T) {
	for _, mode := range []releaseapi.CreateMode{
		releaseapi.CreateDropResponseAfterCommit, releaseapi.CreateDuplicateThenDrop,
		releaseapi.CreateTimeoutBeforeCommit, releaseapi.CreateError500BeforeCommit,
	} {
		t.Run(string(mode), func(t *testing.T) {
			sim, url := startRelease(t)
			require.NoError(t, sim.SetFaults(releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: mode, Times: 1}}}))
			_, err := releaseClient(t, url, 100*time.Millisecond).CreateTicket(context.Background(), ticket)
			providertest.RequireClass(t, provider.ClassUnknown, err)
		})
	}
}

func TestSearchDropsTicketsForOtherTargets(t *testing.T) {
	body := `{"tickets":[` +
		`{"ticket_id":"ticket-1","service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu","requested_by":"a","status":"OPEN","created_at":"2026-08-13T10:51:04Z"},` +
		`{"ticket_id":"ticket-2","service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-us","requested_by":"a","status":"OPEN","created_at":"2026-08-13T10:51:04Z"}` +
		`],"indexed_through":"2026-08-13T10:52:00Z","complete":true}`
	url, _ := fakeProvider(t, http.StatusOK, body)
	result, err := releaseClient(t, url, time.Second).SearchTickets(context.Background(), ticket.Target())
	require.NoError(t, err)
	require.Len(t, result.Tickets, 1)
	assert.Equal(t, "ticket-1", result.Tickets[0].TicketID)
	assert.Equal(t, time.Date(2026, 8, 13, 10, 52, 0, 0, time.UTC), result.IndexedThrough)
}

func TestSearchWithoutWatermarkOrCompletenessIsUnknown(t *testing.T) {
	for name, body := range map[string]string{
		"no watermark":    `{"tickets":[],"complete":true}`,
		"no completeness": `{"tickets":[],"indexed_through":"2026-08-13T10:52:00Z"}`,
		"no tickets":      `{"indexed_through":"2026-08-13T10:52:00Z","complete":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			url, _ := fakeProvider(t, http.StatusOK, body)
			_, err := releaseClient(t, url, time.Second).SearchTickets(context.Background(), ticket.Target())
			perr := providertest.RequireClass(t, provider.ClassUnknown, err)
			assert.Equal(t, provider.CodeResponseMismatch, perr.Code)
		})
	}
}

func TestCoversNeedsCompleteAndAWatermarkPastTheInstant(t *testing.T) {
	at := time.Date(2026, 8, 13, 10, 51, 19, 0, time.UTC)
	assert.True(t, provider.SearchResult{Complete: true, IndexedThrough: at}.Covers(at))
	assert.False(t, provider.SearchResult{Complete: true, IndexedThrough: at.Add(-time.Nanosecond)}.Covers(at))
	assert.False(t, provider.SearchResult{Complete: false, IndexedThrough: at.Add(time.Hour)}.Covers(at))
}

func TestTicketResponseForAnotherTargetIsUnknown(t *testing.T) {
	body := `{"ticket_id":"ticket-1","service":"payments-api","commit":"0000000","environment":"production-eu","requested_by":"a","status":"OPEN","created_at":"2026-08-13T10:51:04Z"}`
	url, _ := fakeProvider(t, http.StatusCreated, body)
	_, err := releaseClient(t, url, time.Second).CreateTicket(context.Background(), ticket)
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, provider.CodeResponseMismatch, perr.Code)
}

func TestTicketPathIsEscaped(t *testing.T) {
	_, url := startRelease(t)
	_, err := releaseClient(t, url, time.Second).GetTicket(context.Background(), "../_sim/stats")
	perr := providertest.RequireClass(t, provider.ClassNotFound, err)
	assert.Equal(t, "ticket_not_found", perr.Code, "the id stays one path segment")

	_, err = releaseClient(t, url, time.Second).GetTicket(context.Background(), "..")
	perr = providertest.RequireClass(t, provider.ClassRejected, err)
	assert.Equal(t, provider.CodeInvalidInput, perr.Code)
}

func TestSearchAnsweringWithTicketsTheFilterExcludesProvesNoAbsence(t *testing.T) {
	// The search filters exactly by service, commit and environment. An
	// answer holding tickets for other targets shows the provider matched
	// differently (an ignored filter answering with a page of everything,
	// or its own normalisation of the values): the exact ticket may be
	// elsewhere, so dropping the others must not leave a zero that proves
	// absence, however complete and recent the watermark.
	body := `{"tickets":[` +
		`{"ticket_id":"ticket-9","service":"orders-api","commit":"0a1b2c3","environment":"staging","requested_by":"a","status":"OPEN","created_at":"2026-08-13T10:51:04Z"}` +
		`],"indexed_through":"2026-08-13T10:52:00Z","complete":true}`
	url, _ := fakeProvider(t, http.StatusOK, body)
	result, err := releaseClient(t, url, time.Second).SearchTickets(context.Background(), ticket.Target())
	require.NoError(t, err)
	assert.Empty(t, result.Tickets, "a ticket for another target is never a match")
	assert.False(t, result.Covers(time.Date(2026, 8, 13, 10, 51, 30, 0, time.UTC)),
		"a zero from a search that did not apply our filter proves nothing")
}
