// Package reconcile is the reconciler: it moves operations the write path
// left undecided towards a proven outcome. It expires lost PENDING leases,
// probes UNKNOWN operations by request key or intended effect, claims
// RETRYABLE ones by a version CAS (only the winner re-sends, with the same
// request key) and escalates to a named operator when budgets run out or a
// probe finds more than one effect.
//
// Every decision is one conditional transition through tools.Executor. A
// lost condition means another worker moved the operation on; that is the
// design working, not an error. Nothing here turns a missing answer into a
// second write: RETRYABLE is entered only on authoritative absence after
// the settle window.
package reconcile
