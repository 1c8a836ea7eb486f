package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools"
)

// storeCalls records every request the store sends to the engine: the
// operation (X-Amz-Target) and its body.
type storeCalls struct {
	mu    sync.Mutex
	calls []storeCall
	next  interface {
		Do(*http.Request) (*http.Response, error)
	}
	// fail, when set, answers the calls it returns an error for with that
	// error instead of sending them.
	fail func(op string) error
}

type storeCall struct {
	Op   string
	Body string
}

func (s *storeCalls) Do(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.mu.Lock()
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	s.calls = append(s.calls, storeCall{Op: op, Body: string(body)})
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		if err := fail(op); err != nil {
			return nil, err
		}
	}
	return s.next.Do(r)
}

// during returns the store calls fn made.
func (s *storeCalls) during(fn func()) []storeCall {
	s.mu.Lock()
	start := len(s.calls)
	s.mu.Unlock()
	fn()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storeCall(nil), s.calls[start:]...)
}

// visibilityWorld is a gateway serving the refund tool on a counted store,
// reachable as any subject.
type visibilityWorld struct {
	calls  *storeCalls
	refund *refundTool
	url    string
	store  *store.Store
	audit  *testsync.Buffer
}

// auditRecords parses the tool-call records an auditor wrote to buf.
func auditRecords(t testing.TB, buf *testsync.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		out = append(out, r)
	}
	return out
}

func newVisibilityWorld(t testing.TB) *visibilityWorld {
	t.Helper()
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	calls := &storeCalls{}
	counted := dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		calls.next = o.HTTPClient
		o.HTTPClient = calls
	})
	st, err := store.New(counted, store.Config{Table: enginetest.TableName(t)})
	require.NoError(t, err)
	enginetest.EnsureTable(t, st)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 2, MaxQueue: 2, MaxWait: time.Second})
	require.NoError(t, err)
	refund := &refundTool{}
	audit := &testsync.Buffer{}
	gw, err := gateway.New(gateway.Config{Executor: ex, Writes: []tools.Published{refund}, Gate: gate, Auditor: obs.NewAuditor(audit)})
	require.NoError(t, err)
	h, err := gw.Handler(mcpserver.Config{Name: "test", Version: "0"})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s auth.Subject
		require.NoError(t, json.Unmarshal([]byte(r.Header.Get("X-Test-Subject")), &s))
		h.ServeHTTP(w, r.WithContext(auth.WithSubject(r.Context(), s)))
	}))
	t.Cleanup(srv.Close)
	return &visibilityWorld{calls: calls, refund: refund, url: srv.URL, store: st, audit: audit}
}

type subjectHeader struct {
	base    http.RoundTripper
	subject string
}

func (s subjectHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Subject", s.subject)
	return s.base.RoundTrip(r)
}

// as opens an MCP session for one subject.
func (w *visibilityWorld) as(t testing.TB, s auth.Subject) *mcp.ClientSession {
	t.Helper()
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: w.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: subjectHeader{base: http.DefaultTransport, subject: string(raw)}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}

// answer is everything a caller can observe of a result.
func answer(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	return string(mustJSON(t, map[string]any{"isError": res.IsError, "content": res.Content, "structured": res.StructuredContent}))
}

var (
	aliceM1 = auth.Subject{ClientID: "shared-agent", UserID: "alice", MerchantID: "M1"}
	bobM2   = auth.Subject{ClientID: "shared-agent", UserID: "bob", MerchantID: "M2"}
	aliceM2 = auth.Subject{ClientID: "shared-agent", UserID: "alice", MerchantID: "M2"}
)

// aliceRefund creates alice@M1's refund and returns its handle.
func (w *visibilityWorld) aliceRefund(t testing.TB) string {
	t.Helper()
	res := call(t, w.as(t, aliceM1), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0001"})
	require.False(t, res.IsError, answer(t, res))
	handle, _ := res.StructuredContent.(map[string]any)["refund_handle"].(string)
	require.NotEmpty(t, handle)
	return handle
}

func TestForeignOperationAndUnknownOperationAnswerAlikeAtTheSameStoreCost(t *testing.T) {
	w := newVisibilityWorld(t)
	handle := w.aliceRefund(t)
	bob := w.as(t, bobM2)
	unknown := "op_" + strings.Repeat("a", len(handle)-3)

	for _, tc := range []struct {
		name             string
		tool             string
		foreign, missing map[string]any
	}{
		{"get_operation by handle", "get_operation", map[string]any{"handle": handle}, map[string]any{"handle": unknown}},
		{"get_operation by operation_id", "get_operation", map[string]any{"operation_id": "alice-op-0001"}, map[string]any{"operation_id": "never-used-0001"}},
		{"resolve_operation by handle", "resolve_operation", map[string]any{"handle": handle, "resolution": "FAILED", "evidence": "x"},
			map[string]any{"handle": unknown, "resolution": "FAILED", "evidence": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var foreign, missing *mcp.CallToolResult
			foreignCalls := w.calls.during(func() { foreign = call(t, bob, tc.tool, tc.foreign) })
			missingCalls := w.calls.during(func() { missing = call(t, bob, tc.tool, tc.missing) })

			assert.True(t, foreign.IsError)
			assert.Equal(t, answer(t, missing), answer(t, foreign), "not visible and not existing are one answer, byte for byte")
			require.Equal(t, len(missingCalls), len(foreignCalls), "the same number of store calls")
			for i := range foreignCalls {
				assert.Equal(t, missingCalls[i].Op, foreignCalls[i].Op)
				assert.Contains(t, foreignCalls[i].Body, "ProjectionExpression", "a foreign operation is never read whole")
			}
		})
	}
}

func TestSameSubjectInAnotherTenantSeesNothing(t *testing.T) {
	w := newVisibilityWorld(t)
	handle := w.aliceRefund(t)
	other := w.as(t, aliceM2)

	res := call(t, other, "get_operation", map[string]any{"handle": handle})
	assert.True(t, res.IsError)
	assert.NotContains(t, answer(t, res), "ch_alice")
	assert.Contains(t, answer(t, res), `"NOT_FOUND"`)

	res = call(t, other, "get_operation", map[string]any{"operation_id": "alice-op-0001"})
	assert.True(t, res.IsError)
	assert.Contains(t, answer(t, res), `"NOT_FOUND"`)

	own := call(t, w.as(t, aliceM1), "get_operation", map[string]any{"handle": handle})
	assert.False(t, own.IsError, "the owner still reads it: %s", answer(t, own))
}

func TestDeduplicatedAnswerRevealsNoOperationTheCallerCannotRead(t *testing.T) {
	w := newVisibilityWorld(t)
	handle := w.aliceRefund(t)
	bob := w.as(t, bobM2)

	res := call(t, bob, "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "bob-op-00000001"})
	assert.True(t, res.IsError, "bob may not see the operation that holds the charge: %s", answer(t, res))
	assert.NotContains(t, answer(t, res), handle, "no handle of an operation bob cannot read")
	assert.NotContains(t, answer(t, res), "re_1", "no resource id")
	assert.NotContains(t, answer(t, res), "receipt", "no receipt")
	assert.Equal(t, int32(1), w.refund.sent.Load(), "nothing was sent")

	read := call(t, bob, "get_operation", map[string]any{"handle": handle})
	assert.True(t, read.IsError, "consistent with get_operation")
}

// A token without a tenant claim writes and reads its own operation: the
// visibility check of a write's answer never turns the caller's own fresh
// insert into "nothing was sent".
func TestATokenWithoutTenantGetsItsOwnWriteAnswered(t *testing.T) {
	w := newVisibilityWorld(t)
	tenantless := auth.Subject{ClientID: "shared-agent", UserID: "tess"}
	cs := w.as(t, tenantless)
	res := call(t, cs, "issue_refund", map[string]any{"charge_id": "ch_tess", "operation_id": "tess-op-00000001"})
	require.False(t, res.IsError, answer(t, res))
	handle := res.StructuredContent.(map[string]any)["refund_handle"].(string)
	read := call(t, cs, "get_operation", map[string]any{"handle": handle})
	assert.False(t, read.IsError, answer(t, read))
	other := call(t, w.as(t, auth.Subject{ClientID: "shared-agent", UserID: "tess", MerchantID: "M1"}), "get_operation", map[string]any{"handle": handle})
	assert.True(t, other.IsError, "the same sub with a tenant is another principal")
}

// The same sub under another tenant replaying alice's operation_id with the
// same arguments on the same client gets nothing of alice's operation.
func TestReplayBySameSubInAnotherTenantRevealsNothing(t *testing.T) {
	w := newVisibilityWorld(t)
	handle := w.aliceRefund(t)
	res := call(t, w.as(t, aliceM2), "issue_refund", map[string]any{"charge_id": "ch_alice", "operation_id": "alice-op-0001"})
	assert.True(t, res.IsError, answer(t, res))
	assert.NotContains(t, answer(t, res), handle)
	assert.Equal(t, int32(1), w.refund.sent.Load(), "nothing was sent")
}
