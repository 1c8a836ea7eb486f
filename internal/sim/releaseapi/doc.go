// Package releaseapi simulates the Release API: a deployment-ticket system
// with NO idempotency support (every POST /tickets creates a ticket) and an
// eventually consistent search. It is the hard case for exactly-once
// writes: after a lost response the only way to learn whether a ticket
// exists is to search for the exact intended effect, and the search may not have caught up.
//
// Routes (all but /_sim/ need X-Api-Key):
//
//	POST /tickets       {"service","commit","environment","requested_by"[,"commit_deadline"]} -> 201 ticket,
//	                    or 422 {"error":"commit_deadline_passed","provider_time"} when
//	                    the deadline has passed by the provider's clock (nothing committed)
//	GET  /tickets/{id}  authoritative read: 200 ticket or 404 {"error":"ticket_not_found"}
//	GET  /tickets?service=&commit=&environment=
//	                    search; a ticket is visible only once
//	                    created_at <= now - search_lag. Response:
//	                    {"tickets":[...],"indexed_through":"<now - lag, RFC3339Nano>","complete":true,
//	                     "searched_at":"<now>"}
//	POST /_sim/faults   replace fault queues, lag and latency (see Faults)
//	GET  /_sim/stats    Stats
//	POST /_sim/reset    clear tickets, faults, counters
//
// indexed_through is the watermark: every ticket created at or before it is
// in the answer (unless complete is false). A zero-match answer proves
// absence only if the watermark is past the latest instant the create could
// have committed. With a commit_deadline that instant is the deadline: the
// simulator never commits a create after it (the promise), except under
// the commit_late_beyond_deadline and commit_on_resend faults, which break
// the promise on purpose. Late-commit faults queue the commit and apply it at its time on
// the next request of any kind. Search filters are optional and exact; an omitted filter
// matches everything.
package releaseapi
