package mcpserver

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request id "MUST be a string or integer". The SDK truncates 2.5 to 2:
// the call would run and its answer name another request. A fractional id
// is refused before anything runs, alone or in a batch; 2.0 is the
// integer 2 and is served.
func TestARequestIDWithAFractionIsRefusedBeforeAnythingRuns(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	ctx := testContext(t)
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"request_risk_review",` +
			`"arguments":{"order_id":"O20260728001","reason":"ids"}}}`
	}
	old := http.Header{"Mcp-Protocol-Version": {version20250618}}

	// Nor an integer beyond 2^53 - 1, which the SDK would answer as
	// another (9007199254740993 as ...992).
	for _, body := range []string{call("2.5"), call("1e-3"), call("9007199254740993"), call("18446744073709551617"),
		"[" + call("1") + "," + call("2.5") + "]"} {
		header := old
		if body[0] == '[' {
			header = http.Header{"Mcp-Protocol-Version": {version20250326}}
		}
		resp := post(t, ctx, srv.URL, header, body)
		assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
		msgs := decodeMessages(t, resp)
		require.Len(t, msgs, 1)
		require.NotNil(t, msgs[0].Error, "%s", resp.body)
		assert.Equal(t, int64(-32600), msgs[0].Error.Code)
		assert.Contains(t, msgs[0].Error.Message, "id must be a string or an integer")
	}
	assert.Empty(t, rec.snapshot(), "nothing ran")

	for i, id := range []string{"2.0", "9007199254740991", "-9007199254740991"} {
		resp := post(t, ctx, srv.URL, old, call(id))
		msgs := decodeMessages(t, resp)
		require.Len(t, msgs, 1)
		assert.Nil(t, msgs[0].Error, "%s", resp.body)
		assert.Len(t, rec.snapshot(), i+1)
	}
	resp := post(t, ctx, srv.URL, old, call("9007199254740991"))
	assert.Contains(t, string(resp.body), `"id":9007199254740991`, "the largest exact id is echoed as sent")
}
