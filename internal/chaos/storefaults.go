package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Store fault kinds, as counted in the summary.
const (
	FaultStoreLostAnswer = "store_answer_lost_after_apply"
	FaultStoreThrottle   = "store_throttled"
	FaultStore5xx        = "store_5xx"
	FaultStoreTimeout    = "store_timeout_after_apply"
	FaultCrashAfterIns   = "crash_after_insert"
	FaultCrashBeforeSW   = "crash_before_state_write"
)

// StoreFaultRates are per-request probabilities of each store fault.
type StoreFaultRates struct {
	LostAnswer float64 // the write is applied, its answer never arrives (connection reset)
	Throttle   float64 // 400 ThrottlingException, nothing applied
	Error5xx   float64 // 500 InternalServerError, nothing applied
	Timeout    float64 // the request is applied, the answer is held until the caller's deadline
}

// crashPlan is a dispatcher crash planned for one operation: at the named
// store step, the agent's call is cancelled (the replica's request context
// ends) and the step's answer is withheld until that context is done.
type crashPlan struct {
	kind   string
	cancel context.CancelFunc
	fired  bool
}

// StoreFaults wraps the DynamoDB SDK's HTTP client of one process (a
// replica or the reconciler) and injects faults drawn from its own seeded
// source. It never changes what the engine applies: every fault either
// withholds a request or withholds an applied request's answer.
type StoreFaults struct {
	next dynamodb.HTTPClient
	rec  *Recorder
	cell int
	who  string

	mu      sync.Mutex
	rng     *rand.Rand
	rates   StoreFaultRates
	enabled bool
	crashes map[string]*crashPlan // by handle
}

// NewStoreFaults wraps next. Faults start enabled.
func NewStoreFaults(next dynamodb.HTTPClient, seed uint64, rates StoreFaultRates, rec *Recorder, cell int, who string) *StoreFaults {
	return &StoreFaults{
		next: next, rec: rec, cell: cell, who: who,
		rng: rand.New(rand.NewPCG(seed, 0x5702e)), rates: rates, enabled: true,
		crashes: map[string]*crashPlan{},
	}
}

// SetEnabled switches random faults and crashes on or off (the quiet phase
// switches them off).
func (f *StoreFaults) SetEnabled(on bool) {
	f.mu.Lock()
	f.enabled = on
	f.mu.Unlock()
}

// PlanCrash arms a crash for the operation with this handle; cancel ends
// the agent's call. kind is FaultCrashAfterIns or FaultCrashBeforeSW.
func (f *StoreFaults) PlanCrash(handle, kind string, cancel context.CancelFunc) {
	f.mu.Lock()
	f.crashes[handle] = &crashPlan{kind: kind, cancel: cancel}
	f.mu.Unlock()
}

// ForgetCrash disarms a crash that did not fire.
func (f *StoreFaults) ForgetCrash(handle string) {
	f.mu.Lock()
	delete(f.crashes, handle)
	f.mu.Unlock()
}

// Do implements dynamodb.HTTPClient.
func (f *StoreFaults) Do(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]

	crash := f.crashFor(op, body)
	if crash != nil && crash.kind == FaultCrashBeforeSW {
		// The dispatcher dies before its state write: nothing is applied.
		f.rec.Fault(f.cell, FaultCrashBeforeSW, f.who+" "+op, crash.handle)
		crash.plan.cancel()
		<-req.Context().Done()
		return nil, fmt.Errorf("chaos: dispatcher crashed before the state write: %w", req.Context().Err())
	}

	kind := f.draw(op)
	switch kind {
	case FaultStoreThrottle:
		f.rec.Fault(f.cell, kind, f.who+" "+op, "")
		return errorResponse(req, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ThrottlingException", "Rate of requests exceeds the allowed throughput (chaos)"), nil
	case FaultStore5xx:
		f.rec.Fault(f.cell, kind, f.who+" "+op, "")
		return errorResponse(req, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error (chaos)"), nil
	}

	resp, err := f.next.Do(req)
	if err != nil {
		return resp, err
	}
	if crash != nil && crash.kind == FaultCrashAfterIns {
		// The insert applied; the dispatcher dies before it hears so.
		drain(resp)
		f.rec.Fault(f.cell, FaultCrashAfterIns, f.who+" "+op, crash.handle)
		crash.plan.cancel()
		<-req.Context().Done()
		return nil, fmt.Errorf("chaos: dispatcher crashed after the insert: %w", req.Context().Err())
	}
	switch kind {
	case FaultStoreLostAnswer:
		drain(resp)
		f.rec.Fault(f.cell, kind, f.who+" "+op, "")
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case FaultStoreTimeout:
		drain(resp)
		f.rec.Fault(f.cell, kind, f.who+" "+op, "")
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return resp, nil
}

type armedCrash struct {
	handle string
	kind   string
	plan   *crashPlan
}

// crashFor finds an armed crash this request triggers: an insert
// (TransactWriteItems with a Put of op#handle) for crash_after_insert, the
// first state write (UpdateItem or a transaction updating op#handle) after
// the insert for crash_before_state_write.
func (f *StoreFaults) crashFor(op string, body []byte) *armedCrash {
	if op != "TransactWriteItems" && op != "UpdateItem" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.enabled || len(f.crashes) == 0 {
		return nil
	}
	for handle, plan := range f.crashes {
		if plan.fired || !bytes.Contains(body, []byte(`"op#`+handle+`"`)) {
			continue
		}
		isInsert := op == "TransactWriteItems" && bytes.Contains(body, []byte(`"Put"`))
		switch {
		case plan.kind == FaultCrashAfterIns && isInsert,
			plan.kind == FaultCrashBeforeSW && !isInsert:
			plan.fired = true
			delete(f.crashes, handle)
			return &armedCrash{handle: handle, kind: plan.kind, plan: plan}
		}
	}
	return nil
}

// draw picks at most one random fault for a request. Reads (GetItem,
// Query) get throttling and 5xx only: a lost answer of a read is a 5xx.
func (f *StoreFaults) draw(op string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.enabled {
		return ""
	}
	write := op == "TransactWriteItems" || op == "UpdateItem" || op == "PutItem" || op == "DeleteItem"
	if op == "CreateTable" || op == "DescribeTable" || op == "DeleteTable" || op == "" {
		return ""
	}
	x := f.rng.Float64()
	r := f.rates
	switch {
	case x < r.Throttle:
		return FaultStoreThrottle
	case x < r.Throttle+r.Error5xx:
		return FaultStore5xx
	case write && x < r.Throttle+r.Error5xx+r.LostAnswer:
		return FaultStoreLostAnswer
	case write && x < r.Throttle+r.Error5xx+r.LostAnswer+r.Timeout:
		return FaultStoreTimeout
	}
	return ""
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("chaos: read store request body: %w", err)
	}
	// Read-only bodies: a WriteTo would reopen the closed-body race the
	// store's own client wrapper closes.
	req.Body = io.NopCloser(readerOnly{bytes.NewReader(body)})
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(readerOnly{bytes.NewReader(body)}), nil }
	req.ContentLength = int64(len(body))
	return body, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func errorResponse(req *http.Request, status int, typ, msg string) *http.Response {
	body := fmt.Sprintf(`{"__type":%q,"message":%q}`, typ, msg)
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":     {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {"chaos"},
			"Date":             {time.Now().UTC().Format(http.TimeFormat)},
		},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

type readerOnly struct{ io.Reader }
