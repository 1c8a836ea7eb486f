package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkInput prints the server CPU one request costs: a normal valid
// call (the baseline); the 4 MB argument attack refused at the default body
// cap and at the largest configurable cap (256 KiB); the same attack just
// under the default cap (the worst a default server pays); and, to show what the
// ceiling costs, a 250 kB attack under a 256 KiB cap, which reaches the
// argument checks and is refused there by the undeclared-property and the
// scalar-type checks before the walks (its cost is the SDK decoding the
// body). `make bench-input` prints the figures side by side with their
// ratio to the baseline.
//
// cpu-ms/op is user+system CPU of the whole process (getrusage) per
// request, so it includes the GC work the request caused.
func BenchmarkInput(b *testing.B) {
	hostile := hostileArrayBody(4_000_000)
	underCap := hostileArrayBody(250_000)
	underDefault := hostileArrayBody(32_000)
	declared := strings.Replace(underCap, `"reason":"r","x":[0`, `"reason":[0`, 1)
	cases := []struct {
		name   string
		cap    int64
		body   string
		status int
	}{
		{"valid_call", 0, validCall, http.StatusOK},
		{"4MB_undeclared_array_default_cap", 0, hostile, http.StatusRequestEntityTooLarge},
		{"32kB_undeclared_array_default_cap", 0, underDefault, http.StatusOK},
		{"4MB_undeclared_array_cap_256KiB", 256 << 10, hostile, http.StatusRequestEntityTooLarge},
		{"250kB_undeclared_array_cap_256KiB", 256 << 10, underCap, http.StatusOK},
		{"250kB_array_as_reason_cap_256KiB", 256 << 10, declared, http.StatusOK},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			rec := &recorder{}
			h, err := New(Config{Name: "bench", Version: "1", MaxBodyBytes: tc.cap}, reviewTool(rec))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", version20250618)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != tc.status {
					b.Fatalf("status %d, want %d: %.200s", w.Code, tc.status, w.Body.String())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			if tc.status != http.StatusOK || tc.body != validCall {
				if n := len(rec.snapshot()); n != 0 {
					b.Fatalf("%d hostile calls reached the tool", n)
				}
			}
		})
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
