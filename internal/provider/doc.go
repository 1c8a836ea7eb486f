// Package provider holds the downstream contracts (Risk API, Release API),
// their HTTP clients and the classification of every failure into what it
// proves about the effect. The classification is the whole point: a missing
// response must never be mistaken for a failed operation.
//
// # Error classes and what the state machine does with them
//
// Every error a client returns is a *Error (use errors.As or ClassOf):
//
//   - ClassRejected: the provider answered with an explicit 4xx refusal
//     (422 rejected, 404 order_not_found on create, 400, 401, 403 ...).
//     The provider says it did nothing: proven no effect. A create with this
//     class ends FAILED (outcome failed_without_effect). Inputs the client
//     refuses before sending (empty fields, malformed request key) are also
//     ClassRejected with Code "invalid_input"; retrying them cannot help.
//
//   - ClassUnknown: the request may have been acted on and we lack the
//     answer: a timeout after the request was written, a reset or EOF while
//     waiting for the response, any 5xx (a 500 may come after the commit),
//     408 and 429 (kept conservative: a proxy may answer them after
//     forwarding), 409 and 425 (an idempotency-key server's answer while a
//     request with the same key is still in progress), an unexpected 1xx/3xx, a 2xx that cannot be decoded or
//     does not describe the intended effect, a body too large. A create with
//     this class goes PENDING -> UNKNOWN with outcome
//     dispatch_acknowledged_response_missing; only the reconciler's lookup
//     moves it on. On a lookup this class means "inconclusive": stay UNKNOWN.
//
//   - ClassNotDispatched: the client can prove no byte of the request left
//     the process: the caller's context was already done, the dial failed
//     (connection refused, DNS), or the call gave up while waiting for a
//     connection (the MaxConns cap) — seen with net/http/httptrace: GetConn
//     fired but GotConn never did, and WroteRequest never fired. Proven no
//     effect, but nothing wrong with the intent: the lead maps it to
//     RETRYABLE with the same request key, so that only the reconciler's
//     claim re-sends.
//
//   - ClassNotFound: a read (GetOrder, GetTicket, GetReview) got 404: the
//     provider authoritatively says the object does not exist. For lookups
//     by request key the authoritative absence is instead a successful empty
//     answer: FindReviewByRequestKey returns found=false with a nil error.
//     An answer holding a review under another key is no such absence (the
//     filter was not applied): ClassUnknown, "response_mismatch".
//
// ClassOf(nil) is ClassNone; ClassOf of an error that is not a *Error is
// ClassUnknown, the only safe default.
//
// # Release search and its watermark
//
// The Release API has no idempotency, so a lost create can only be
// reconciled by searching for the exact intended effect (service, commit,
// environment). The search index lags: SearchResult.IndexedThrough says up to
// which instant the answer is complete, and Complete=false says tickets were
// withheld. A zero-match answer proves absence only when
// SearchResult.Covers(t) holds for t = the latest instant the create could
// have committed (the attempt's deadline plus a settle margin for clock skew
// and server-side processing that outlives the client). Anything else is
// verification_inconclusive. More than one match is an incident. Tickets the
// search returns for other targets are dropped and make the answer
// incomplete: the provider did not match as asked, so its zero proves nothing.
//
// # Requests
//
// Clients authenticate with their own X-Api-Key and never send an
// Authorization header: nothing from the MCP caller is forwarded. Each call's
// deadline is the earlier of the configured Timeout and the caller's context.
// Connections are HTTP/1.1 only, so RiskConfig.MaxConns (Transport
// MaxConnsPerHost) caps the number of concurrent calls to the provider.
// POSTs are never replayed by the transport (net/http would otherwise resend
// a request carrying Idempotency-Key on a stale keep-alive connection): a
// resend is the reconciler's decision, never the HTTP stack's.
//
// Response bodies are bounded (MaxResponseBytes), must be one JSON value,
// must carry every field the caller relies on, and must describe the effect
// that was asked for (same request key, same order, same target); a 2xx that
// fails these checks is ClassUnknown with Code "undecodable_response" or
// "response_mismatch". Unknown extra fields are tolerated so that additive
// provider changes do not turn every call into an UNKNOWN.
package provider
