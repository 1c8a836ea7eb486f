// Package riskapi simulates the Risk API: an order system whose review
// creation is idempotent by request key (Idempotency-Key header) and whose
// lookup by request key is authoritative and consistent. It is a real HTTP
// handler with real deduplication; faults are injected over HTTP at
// POST /_sim/faults or with SetFaults.
//
// Routes (all but /_sim/ need X-Api-Key):
//
//	POST /reviews              Idempotency-Key: K; {"order_id","reason","review_type"}
//	                           201 new review, 200 the review already created for K,
//	                           400 bad request, 404 {"error":"order_not_found"},
//	                           422 {"error":"rejected"} (fault)
//	GET  /reviews?request_key=K  200 {"reviews":[...]} with 0 or 1 items
//	GET  /reviews/{id}         200 review or 404 {"error":"review_not_found"}
//	GET  /orders/{id}          200 {"order_id","merchant_id"} or 404 {"error":"order_not_found"}
//	POST /_sim/faults          replace fault queues and latency (see Faults)
//	GET  /_sim/stats           Stats
//	POST /_sim/reset           clear reviews, faults, counters (orders stay seeded)
//
// A same-key create returns the first review whatever the body says (first
// write wins); the caller's request digest is what guards against a key
// reused for a different intent.
//
// Orders O20260728001–O20260728050 belong to merchant M1 and
// O20260728051–O20260728100 to M2.
package riskapi
