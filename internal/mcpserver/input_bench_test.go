package mcpserver

import (
	"fmt"
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
// body). Two JSON-RPC batches at 2025-03-26 (no version header): the
// largest accepted (maxBatchEntries valid calls, each run) and 150 calls
// in 21 kB, refused whole. `make bench-input` prints the figures side by
// side with their ratio to the baseline.
//
// cpu-ms/op is user+system CPU of the whole process (getrusage) per
// request, so it includes the GC work the request caused.
func BenchmarkInput(b *testing.B) {
	hostile := hostileArrayBody(4_000_000)
	underCap := hostileArrayBody(250_000)
	underDefault := hostileArrayBody(32_000)
	declared := strings.Replace(underCap, `"reason":"r","x":[0`, `"reason":[0`, 1)
	// version is the MCP-Protocol-Version header ("" sends none: 2025-03-26,
	// the revision with batches); calls is how many reach the tool per
	// request.
	cases := []struct {
		name    string
		cap     int64
		version string
		body    string
		status  int
		calls   int
	}{
		{"valid_call", 0, version20250618, validCall, http.StatusOK, 1},
		{"4MB_undeclared_array_default_cap", 0, version20250618, hostile, http.StatusRequestEntityTooLarge, 0},
		{"32kB_undeclared_array_default_cap", 0, version20250618, underDefault, http.StatusOK, 0},
		{"4MB_undeclared_array_cap_256KiB", 256 << 10, version20250618, hostile, http.StatusRequestEntityTooLarge, 0},
		{"250kB_undeclared_array_cap_256KiB", 256 << 10, version20250618, underCap, http.StatusOK, 0},
		{"250kB_array_as_reason_cap_256KiB", 256 << 10, version20250618, declared, http.StatusOK, 0},
		{fmt.Sprintf("batch_of_%d_valid_calls", maxBatchEntries), 0, "", batchOf(maxBatchEntries), http.StatusOK, maxBatchEntries},
		{"batch_of_150_calls_refused", 0, "", batchOf(150), http.StatusBadRequest, 0},
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
				if tc.version != "" {
					req.Header.Set("MCP-Protocol-Version", tc.version)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != tc.status {
					b.Fatalf("status %d, want %d: %.200s", w.Code, tc.status, w.Body.String())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			if n := len(rec.snapshot()); n != tc.calls*b.N {
				b.Fatalf("%d calls reached the tool in %d requests, want %d per request", n, b.N, tc.calls)
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
