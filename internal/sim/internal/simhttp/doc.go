// Package simhttp holds the plumbing the simulators share: the service-key
// guard, the in-flight gauge, strict JSON bodies, fault queues and the two
// ways a simulated fault withholds a response (hold until the client leaves,
// drop the connection). It is internal to internal/sim.
package simhttp
