package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkGetOperation prints what get_operation costs a caller for an
// unknown handle, another tenant's operation and the caller's own, on the
// local engine: wall time and store calls per call. The three calls take
// turns inside one loop, so load on the machine falls on all of them alike.
// Unknown and foreign must match in store calls (and so, within the
// engine's noise, in time); the caller's own costs one more read, the whole
// item. `make bench-visibility` prints them side by side.
func BenchmarkGetOperation(b *testing.B) {
	w := newVisibilityWorld(b)
	handle := w.aliceRefund(b)
	unknown := "op_" + strings.Repeat("a", len(handle)-3)
	bob, alice := w.as(b, bobM2), w.as(b, aliceM1)
	cases := []struct {
		name   string
		cs     *mcp.ClientSession
		handle string
		took   time.Duration
		calls  int
	}{
		{name: "unknown", cs: bob, handle: unknown},
		{name: "foreign", cs: bob, handle: handle},
		{name: "own", cs: alice, handle: handle},
	}
	for b.Loop() {
		for i := range cases {
			c := &cases[i]
			start := time.Now()
			c.calls += len(w.calls.during(func() { call(b, c.cs, "get_operation", map[string]any{"handle": c.handle}) }))
			c.took += time.Since(start)
		}
	}
	for _, c := range cases {
		b.ReportMetric(float64(c.took)/float64(time.Millisecond)/float64(b.N), c.name+"-ms/op")
		b.ReportMetric(float64(c.calls)/float64(b.N), c.name+"-store-calls/op")
	}
}
