package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
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
	holds   []*insertHold         // bursts whose inserts to hold (two may hit one replica at once)
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

// HoldInserts makes this process hold the inserts of h's burst until h is
// lifted; the returned func stops matching them.
func (f *StoreFaults) HoldInserts(h *insertHold) (forget func()) {
	f.mu.Lock()
	f.holds = append(f.holds, h)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.holds = slices.DeleteFunc(f.holds, func(x *insertHold) bool { return x == h })
		f.mu.Unlock()
	}
}

// Do implements dynamodb.HTTPClient.
func (f *StoreFaults) Do(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]

	// Before any drawn fault: a held insert is still inside its call's
	// gate slot, whatever happens to it afterwards.
	if h, handle := f.holdFor(op, body); h != nil {
		if err := h.hold(req.Context(), f.who, handle); err != nil {
			return nil, err
		}
	}
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

// holdFor finds the burst hold this request is caught by: an insert
// (TransactWriteItems with a Put of op#handle) of one of its handles.
func (f *StoreFaults) holdFor(op string, body []byte) (*insertHold, string) {
	if op != "TransactWriteItems" || !bytes.Contains(body, []byte(`"Put"`)) {
		return nil, ""
	}
	f.mu.Lock()
	holds := slices.Clone(f.holds)
	f.mu.Unlock()
	for _, h := range holds {
		for _, handle := range h.handles {
			if bytes.Contains(body, []byte(`"op#`+handle+`"`)) {
				return h, handle
			}
		}
	}
	return nil, ""
}

// insertHold holds the inserts of a burst's calls in a replica process's
// store transport until the campaign lifts it (run.go). An admitted write
// keeps its gate slot until its insert returns, so while the hold lasts
// every admitted burst call occupies a slot: the gate must refuse the
// rest, and Holds shows how many it let in at once (invariant 7).
type insertHold struct {
	handles []string
	size    int // calls in the burst

	mu       sync.Mutex
	heldNow  int
	answered int
	holds    []Hold
	lifted   chan struct{}
	changed  chan struct{} // a nudge for liftWhenSettled, capacity 1
}

func newInsertHold(handles []string) *insertHold {
	return &insertHold{handles: handles, size: len(handles), lifted: make(chan struct{}), changed: make(chan struct{}, 1)}
}

// hold keeps one insert until the hold is lifted. If the request's
// context ends first the insert is never sent (nothing applied), as a
// timeout before the engine would be. An insert arriving after the lift
// passes unrecorded.
func (h *insertHold) hold(ctx context.Context, who, handle string) error {
	h.mu.Lock()
	select {
	case <-h.lifted:
		h.mu.Unlock()
		return nil
	default:
	}
	i := len(h.holds)
	h.holds = append(h.holds, Hold{Process: who, Handle: handle, From: time.Now()})
	h.heldNow++
	h.mu.Unlock()
	h.nudge()

	var err error
	select {
	case <-h.lifted:
	case <-ctx.Done():
		err = fmt.Errorf("chaos: held burst insert given up before it was sent: %w", ctx.Err())
	}
	h.mu.Lock()
	h.holds[i].To = time.Now()
	h.heldNow--
	h.mu.Unlock()
	h.nudge()
	return err
}

// callReturned counts a burst call whose caller has its answer (or gave up).
func (h *insertHold) callReturned() {
	h.mu.Lock()
	h.answered++
	h.mu.Unlock()
	h.nudge()
}

func (h *insertHold) nudge() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// liftWhenSettled lifts the hold once every burst call has returned or is
// held (complete: no burst call can reach its insert after the lift), or
// when limit has passed (not complete).
func (h *insertHold) liftWhenSettled(limit time.Duration) (complete bool, at time.Time) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	expired := false
	for {
		h.mu.Lock()
		complete = h.heldNow+h.answered >= h.size
		if complete || expired {
			close(h.lifted)
			at = time.Now()
			h.mu.Unlock()
			return complete, at
		}
		h.mu.Unlock()
		select {
		case <-h.changed:
		case <-timer.C:
			expired = true
		}
	}
}

// snapshot copies the holds recorded so far.
func (h *insertHold) snapshot() []Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Hold(nil), h.holds...)
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
