package obs

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Outside Lambda the handler continues a caller's X-Amzn-Trace-Id. X-Ray
// accepts only trace ids of the form 1-<8 hex>-<24 hex> and segment ids of
// 16 hex digits: a segment that names anything else is rejected with every
// subsegment under it, so a malformed Root starts a new trace and a
// malformed Parent is not recorded.
func TestHandlerOutsideLambdaStartsANewTraceForAMalformedIncomingHeader(t *testing.T) {
	d := newDaemon(t)
	tr := newTestTracer(t, true, d)
	h := tr.Handler("intentgate-mcp", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set(TraceHeader, "Root=not-a-trace-id;Parent=xyz;Sampled=1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	doc := d.next(t)
	assert.Regexp(t, `^1-[0-9a-f]{8}-[0-9a-f]{24}$`, doc["trace_id"])
	assert.NotContains(t, doc, "parent_id")
	assert.Contains(t, rec.Header().Get(TraceHeader), "Root="+doc["trace_id"].(string))
}
