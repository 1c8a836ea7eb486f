// Package admission protects the downstream providers and the caller's
// deadline: a per-instance concurrency gate with a bounded queue that
// answers a fast OVERLOADED instead of piling up work, and a deadline
// budget that makes every downstream call end before the caller's (and the
// Lambda's) deadline with time left to record UNKNOWN and answer.
//
// The gate is per process. The cross-replica bound comes from reserved
// concurrency and API Gateway throttling (docs/design.md, Capacity model); the
// gate only stops one instance from queueing more than it can serve.
package admission
