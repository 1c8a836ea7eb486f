// Package sim holds the downstream simulators used by the devstack and by
// integration tests. Each simulator is a real HTTP server (an http.Handler)
// with real behaviour: the Risk API really deduplicates by Idempotency-Key,
// the Release API really has no idempotency and a lagging search index.
// Faults are injected over HTTP (POST /_sim/faults) or through the Go
// methods, so a test can make a create commit and then lose its response
// — the failure that turns naive retries into duplicate effects.
//
//   - riskapi: idempotent create by request key, authoritative lookup by key.
//   - releaseapi: no idempotency, eventually consistent search with an
//     indexed_through watermark, authoritative read by ticket id.
//
// Common conventions (internal/sim/internal/simhttp):
//   - every request outside /_sim/ must carry X-Api-Key; otherwise 401;
//   - any request carrying an Authorization header at all sets
//     stats.foreign_authorization_seen, because the gateway must never forward
//     a caller's token downstream;
//   - max_in_flight is measured over handlers actually running for
//     non-/_sim requests, so tests can check a client's connection cap;
//   - POST /_sim/faults replaces the fault queues and latency/lag (it does not
//     append); queued faults are consumed in order, each entry "times" times;
//   - POST /_sim/reset clears data, faults and counters. Identifiers keep
//     counting up across resets so a stale reference never aliases a new
//     object.
package sim
