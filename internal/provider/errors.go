package provider

import (
	"errors"
	"fmt"
)

// Class says what a failed call proves about the downstream effect.
type Class string

// The classes. See the package documentation for the state machine mapping.
const (
	// ClassNone is the class of a nil error.
	ClassNone Class = ""
	// ClassRejected: explicit business refusal, proven no effect.
	ClassRejected Class = "rejected"
	// ClassUnknown: the request may have taken effect; outcome unknown.
	ClassUnknown Class = "unknown"
	// ClassNotDispatched: provably never sent; no effect.
	ClassNotDispatched Class = "not_dispatched"
	// ClassNotFound: authoritative 404 on a read.
	ClassNotFound Class = "not_found"
)

// Codes set by the client itself (provider codes come from the error body).
const (
	CodeInvalidInput        = "invalid_input"
	CodeUndecodableResponse = "undecodable_response"
	CodeResponseMismatch    = "response_mismatch"
	CodeResponseTooLarge    = "response_too_large"
	CodeMultipleMatches     = "multiple_matches"
)

// ErrMultipleMatches is wrapped when a lookup that must return at most one
// effect returned several: the uniqueness control already failed and the
// caller should escalate, not pick one.
var ErrMultipleMatches = errors.New("provider returned more than one matching effect")

// Error is every failure a provider client returns.
type Error struct {
	Class Class
	// Op names the call, e.g. "risk.create_review".
	Op string
	// StatusCode is the HTTP status, 0 when no response arrived.
	StatusCode int
	// Code is the provider's error code ("order_not_found", "rejected") or
	// one of the client's Code* constants.
	Code string
	// Message is the provider's human-readable message, if any.
	Message string
	Err     error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Op, e.Class)
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(" (status %d)", e.StatusCode)
	}
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err: ClassNone for nil, the *Error's class if
// err wraps one, and ClassUnknown otherwise (never assume no effect).
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var perr *Error
	if errors.As(err, &perr) {
		return perr.Class
	}
	return ClassUnknown
}

func invalidInput(op, message string) *Error {
	return &Error{Class: ClassRejected, Op: op, Code: CodeInvalidInput, Message: message}
}
