// Package simhttp holds the plumbing the simulators share: the service-key
// guard and the traffic it observes (in-flight gauge, forwarded
// Authorization headers), the /_sim/ control routes, strict JSON bodies,
// fault queues, the create faults both simulators answer alike, and the two
// ways a simulated fault withholds a response (hold until the client
// leaves, drop the connection). It is internal to internal/sim.
package simhttp
