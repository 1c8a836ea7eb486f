package apigwfront

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEventCarriesTheRequestAsAPIGatewayPayload20(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://mcp.example.test/mcp?x=1&y=2", strings.NewReader(`{"jsonrpc":"2.0"}`))
	r.Header.Set("Authorization", "Bearer t")
	r.Header.Add("Accept", "application/json")
	r.Header.Add("Accept", "text/event-stream")
	r.Header.Set("Cookie", "a=1; b=2")
	r.RemoteAddr = "127.0.0.1:5555"
	now := time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC)

	ev := Event(r, []byte(`{"jsonrpc":"2.0"}`), "POST /mcp", "req-1", now)

	assert.Equal(t, "2.0", ev.Version)
	assert.Equal(t, "POST /mcp", ev.RouteKey)
	assert.Equal(t, "/mcp", ev.RawPath)
	assert.Equal(t, "x=1&y=2", ev.RawQueryString)
	assert.Equal(t, "Bearer t", ev.Headers["authorization"])
	assert.Equal(t, "application/json,text/event-stream", ev.Headers["accept"], "repeated headers are joined")
	assert.Equal(t, "mcp.example.test", ev.Headers["host"])
	assert.Equal(t, "17", ev.Headers["content-length"])
	assert.NotContains(t, ev.Headers, "cookie")
	assert.Equal(t, []string{"a=1", "b=2"}, ev.Cookies)
	assert.Equal(t, `{"jsonrpc":"2.0"}`, ev.Body)
	assert.False(t, ev.IsBase64Encoded)
	assert.Equal(t, "POST", ev.RequestContext.HTTP.Method)
	assert.Equal(t, "127.0.0.1", ev.RequestContext.HTTP.SourceIP)
	assert.Equal(t, "mcp.example.test", ev.RequestContext.DomainName)
	assert.Equal(t, "$default", ev.RequestContext.Stage)
	assert.Equal(t, "28/Jul/2026:10:31:08 +0000", ev.RequestContext.Time)
	assert.Equal(t, now.UnixMilli(), ev.RequestContext.TimeEpoch)
}

func TestBinaryBodiesAreBase64Encoded(t *testing.T) {
	body := []byte{0xff, 0xfe, 0x00}
	ev := Event(httptest.NewRequest(http.MethodPost, "/mcp", nil), body, "$default", "r", time.Now())
	assert.True(t, ev.IsBase64Encoded)
	assert.Equal(t, base64.StdEncoding.EncodeToString(body), ev.Body)
}

func TestWriteResponseDecodesBodyAndKeepsHeadersAndCookies(t *testing.T) {
	rec := httptest.NewRecorder()
	err := WriteResponse(rec, events.APIGatewayV2HTTPResponse{
		StatusCode:        401,
		Headers:           map[string]string{"Content-Type": "application/json"},
		MultiValueHeaders: map[string][]string{"Www-Authenticate": {`Bearer a="1"`, `Bearer b="2"`}},
		Cookies:           []string{"s=1; Path=/"},
		Body:              base64.StdEncoding.EncodeToString([]byte(`{"error":"x"}`)),
		IsBase64Encoded:   true,
	})
	require.NoError(t, err)
	assert.Equal(t, 401, rec.Code)
	assert.Equal(t, `{"error":"x"}`, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, []string{`Bearer a="1"`, `Bearer b="2"`}, rec.Header().Values("Www-Authenticate"))
	assert.Equal(t, []string{"s=1; Path=/"}, rec.Header().Values("Set-Cookie"))
}

func TestAnUnreachableFunctionIsABadGateway(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	rec := httptest.NewRecorder()
	New(url+"/2015-03-31/functions/function/invocations", "$default").ServeHTTP(rec,
		httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}")))
	assert.Equal(t, http.StatusBadGateway, rec.Code)
}

func TestAnOversizedBodyIsRefusedBeforeInvoking(t *testing.T) {
	rec := httptest.NewRecorder()
	New("http://127.0.0.1:1/never", "$default").ServeHTTP(rec,
		httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(strings.Repeat("x", MaxBodyBytes+1))))
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
}

// TestInvocationsAreOneAtATime: an emulator is one execution environment
// and crashes when a second invocation arrives while one runs; the front
// queues concurrent requests instead.
func TestInvocationsAreOneAtATime(t *testing.T) {
	var running, most atomic.Int32
	function := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		var ev events.APIGatewayV2HTTPRequest
		_ = json.NewDecoder(r.Body).Decode(&ev)
		_ = json.NewEncoder(w).Encode(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: ev.RequestContext.RequestID})
	}))
	defer function.Close()
	front := httptest.NewServer(New(function.URL, ""))
	defer front.Close()

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(front.URL+"/mcp", "application/json", strings.NewReader("{}"))
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "never two invocations at once")
}

// TestARequestForAnotherHostIsForbiddenBeforeInvoking: API Gateway serves
// only its own domains, so a DNS-rebinding request never reaches the
// function.
func TestARequestForAnotherHostIsForbiddenBeforeInvoking(t *testing.T) {
	var invoked atomic.Int32
	function := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invoked.Add(1)
		_ = json.NewEncoder(w).Encode(events.APIGatewayV2HTTPResponse{StatusCode: 200})
	}))
	defer function.Close()
	front := New(function.URL, "", "localhost", "127.0.0.1")

	evil := httptest.NewRequest(http.MethodPost, "http://attacker.example:8080/mcp", strings.NewReader("{}"))
	rec := httptest.NewRecorder()
	front.ServeHTTP(rec, evil)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, int32(0), invoked.Load())

	own := httptest.NewRequest(http.MethodPost, "http://localhost:8080/mcp", strings.NewReader("{}"))
	rec = httptest.NewRecorder()
	front.ServeHTTP(rec, own)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, int32(1), invoked.Load())
}
