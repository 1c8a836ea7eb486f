package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"syscall"
)

// request is one HTTP call to a provider.
type request struct {
	op     string
	method string
	url    *url.URL
	header http.Header // extra headers, e.g. Idempotency-Key
	body   any         // JSON-encoded when non-nil
}

// response is what came back. bodyErr is set when the status arrived but
// the body could not be read whole.
type response struct {
	status  int
	body    []byte
	bodyErr error
}

// dispatchTrace records how far a request got, to tell "never sent" from
// "sent, answer lost". Hooks may run on transport goroutines.
type dispatchTrace struct {
	getConn, gotConn, wroteRequest atomic.Bool
	// attempts and writes count the transport's attempts (it retries a
	// replayable request on a fresh connection) and the ones written.
	attempts, writes atomic.Int32
}

// lastAttemptWritten: the transport's latest attempt has been written, so
// the provider may be working on it. A retry still waiting for a
// connection has not.
func (d *dispatchTrace) lastAttemptWritten() bool {
	return d.writes.Load() >= d.attempts.Load()
}

func (d *dispatchTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn:      func(string) { d.attempts.Add(1); d.getConn.Store(true) },
		GotConn:      func(httptrace.GotConnInfo) { d.gotConn.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { d.writes.Add(1); d.wroteRequest.Store(true) },
	}
}

// do sends req within the endpoint's timeout. A non-nil error is a *Error
// classified by how far the request got; any response status is returned
// for the caller to classify.
//
// The caller is answered at its own deadline, but a request already
// written is not cut off then: the provider has it and keeps working on
// it whatever we do, so its connection, which is what MaxConns counts,
// stays taken until the provider answers, for at most the timeout plus the
// settle window (how long the provider may go on working on it). Callers giving up on a slow provider (ownership lookups
// past their short budget, in a latency spike) then wait for a connection
// instead of piling more concurrent work onto it. A request not yet
// written is stopped at once, so "never sent" stays provable.
func (e *endpoint) do(ctx context.Context, req request) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, &Error{Class: ClassNotDispatched, Op: req.op, Err: fmt.Errorf("context done before dispatch: %w", err)}
	}
	callerCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	// The request's own context keeps the caller's values, not its
	// cancellation: it ends with the provider's answer, when stopped, or
	// once the provider can no longer be working on it.
	sendCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), e.held)

	var body io.Reader
	if req.body != nil {
		encoded, err := json.Marshal(req.body)
		if err != nil {
			stop()
			return response{}, &Error{Class: ClassNotDispatched, Op: req.op, Err: fmt.Errorf("encode request: %w", err)}
		}
		body = bytes.NewReader(encoded)
	}
	trace := &dispatchTrace{}
	httpReq, err := http.NewRequestWithContext(httptrace.WithClientTrace(sendCtx, trace.clientTrace()), req.method, req.url.String(), body)
	if err != nil {
		stop()
		return response{}, &Error{Class: ClassNotDispatched, Op: req.op, Err: fmt.Errorf("build request: %w", err)}
	}
	// Without GetBody net/http cannot replay the POST on a stale keep-alive
	// connection; a resend is the reconciler's call, not the transport's.
	httpReq.GetBody = nil
	for k, vs := range req.header {
		for _, v := range vs {
			httpReq.Header.Add(k, v)
		}
	}
	httpReq.Header.Set("X-Api-Key", e.apiKey)
	httpReq.Header.Set("Accept", "application/json")
	if req.body != nil {
		httpReq.Header.Set("Content-Type", "application/json")
	}
	httpReq.Header.Del("Authorization") // never anyone's token, whatever a hook added

	type roundTrip struct {
		out response
		err error
	}
	done := make(chan roundTrip, 1)
	go func() {
		defer stop()
		resp, err := e.client.Do(httpReq)
		if err != nil {
			done <- roundTrip{err: err}
			return
		}
		defer resp.Body.Close()
		out := response{status: resp.StatusCode}
		out.body, out.bodyErr = io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
		if out.bodyErr == nil && len(out.body) > MaxResponseBytes {
			out.bodyErr = errTooLarge
		}
		done <- roundTrip{out: out}
	}()

	var rt roundTrip
	select {
	case rt = <-done:
	case <-callerCtx.Done():
		select {
		case rt = <-done: // answered just as the caller's deadline came: the answer counts
			return answered(req, rt.out, rt.err, trace)
		default:
		}
		if trace.wroteRequest.Load() && trace.lastAttemptWritten() {
			// Sent: left to finish in the background, holding its
			// connection; this caller learns nothing more.
			return response{}, &Error{Class: ClassUnknown, Op: req.op,
				Err: fmt.Errorf("no answer before the caller's deadline: %w", callerCtx.Err())}
		}
		stop() // not (wholly) written: stopped, and classified by how far it got
		rt = <-done
	}
	return answered(req, rt.out, rt.err, trace)
}

// answered is do's result for a round trip that ended.
func answered(req request, out response, err error, trace *dispatchTrace) (response, error) {
	if err != nil {
		return response{}, &Error{Class: classifyTransport(err, trace), Op: req.op, Err: err}
	}
	return out, nil
}

var errTooLarge = fmt.Errorf("response body exceeds %d bytes", MaxResponseBytes)

// classifyTransport decides what a failed round trip proves. Only evidence
// that no byte was written counts as "not dispatched"; everything else is
// unknown.
func classifyTransport(err error, trace *dispatchTrace) Class {
	if trace.wroteRequest.Load() {
		return ClassUnknown
	}
	var opErr *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &opErr) && opErr.Op == "dial") {
		return ClassNotDispatched
	}
	// The transport looked for a connection and never got one (queued
	// behind MaxConns, or dialing) — so nothing was written.
	if trace.getConn.Load() && !trace.gotConn.Load() {
		return ClassNotDispatched
	}
	return ClassUnknown
}

// providerError is the JSON error body both providers use.
type providerError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// statusError classifies a non-success status. notFound is the class a 404
// gets for this call (Rejected for creates, NotFound for reads).
func statusError(op string, resp response, notFound Class) *Error {
	var pe providerError
	_ = json.Unmarshal(resp.body, &pe) // best effort: the status decides the class
	e := &Error{Op: op, StatusCode: resp.status, Code: pe.Error, Message: pe.Message, Err: resp.bodyErr}
	switch {
	case resp.status == http.StatusNotFound:
		e.Class = notFound
	case resp.status == http.StatusRequestTimeout || resp.status == http.StatusTooManyRequests ||
		resp.status == http.StatusConflict || resp.status == http.StatusTooEarly:
		// 409 is what an idempotency-key server answers while a request with
		// the same key is still being processed (IETF Idempotency-Key draft):
		// the first attempt may yet commit, so it proves nothing.
		e.Class = ClassUnknown
	case resp.status >= 400 && resp.status < 500:
		e.Class = ClassRejected
	default: // 5xx, and any 1xx/2xx/3xx we did not expect
		e.Class = ClassUnknown
	}
	return e
}

// decodeSuccess strictly decodes a 2xx body into v: whole, one JSON value.
func decodeSuccess(op string, resp response, v any) error {
	if resp.bodyErr != nil {
		code := CodeUndecodableResponse
		if errors.Is(resp.bodyErr, errTooLarge) {
			code = CodeResponseTooLarge
		}
		return &Error{Class: ClassUnknown, Op: op, StatusCode: resp.status, Code: code, Err: resp.bodyErr}
	}
	dec := json.NewDecoder(bytes.NewReader(resp.body))
	if err := dec.Decode(v); err != nil {
		return &Error{Class: ClassUnknown, Op: op, StatusCode: resp.status, Code: CodeUndecodableResponse, Err: fmt.Errorf("decode response: %w", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Class: ClassUnknown, Op: op, StatusCode: resp.status, Code: CodeUndecodableResponse, Err: errors.New("decode response: trailing data")}
	}
	return nil
}

// getJSON sends a GET to u and strictly decodes a 200 answer into v. Any
// other status is a statusError, whose 404 gets the class notFound.
func (e *endpoint) getJSON(ctx context.Context, op string, u *url.URL, notFound Class, v any) error {
	resp, err := e.do(ctx, request{op: op, method: http.MethodGet, url: u})
	if err != nil {
		return err
	}
	if resp.status != http.StatusOK {
		return statusError(op, resp, notFound)
	}
	return decodeSuccess(op, resp, v)
}

// mismatch reports a 2xx that does not describe what was asked for.
func mismatch(op string, status int, format string, args ...any) *Error {
	return &Error{Class: ClassUnknown, Op: op, StatusCode: status, Code: CodeResponseMismatch, Err: fmt.Errorf(format, args...)}
}
