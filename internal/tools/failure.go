package tools

import "fmt"

// Code is a stable business outcome code shown to callers.
type Code string

// Business codes (docs/design.md, Results and their schemas).
const (
	CodeUnauthenticated      Code = "UNAUTHENTICATED"
	CodeInvalidArgument      Code = "INVALID_ARGUMENT"
	CodeNotFound             Code = "NOT_FOUND"
	CodeForbidden            Code = "FORBIDDEN"
	CodeIdempotencyConflict  Code = "IDEMPOTENCY_CONFLICT"
	CodeTemporaryUnavailable Code = "TEMPORARY_UNAVAILABLE"
	CodeOverloaded           Code = "OVERLOADED"
	CodePreconditionFailed   Code = "PRECONDITION_FAILED"
	// An accepted operation that did not (yet) succeed: these come with the
	// operation's handle and status, never instead of them.
	CodeOperationUnknown   Code = "OPERATION_UNKNOWN"
	CodeOperationFailed    Code = "OPERATION_FAILED"
	CodeOperationEscalated Code = "OPERATION_ESCALATED"
)

// AllCodes lists every code, for schemas and exhaustive tests.
func AllCodes() []Code {
	return []Code{CodeUnauthenticated, CodeInvalidArgument, CodeNotFound, CodeForbidden, CodeIdempotencyConflict,
		CodeTemporaryUnavailable, CodeOverloaded, CodePreconditionFailed, CodeOperationUnknown, CodeOperationFailed,
		CodeOperationEscalated}
}

// NextAction tells the caller what to do next: which tool, with which handle.
type NextAction struct {
	Tool      string            `json:"tool,omitempty"`
	Arguments map[string]string `json:"arguments,omitempty"`
	Hint      string            `json:"hint"`
}

// Failure is a business outcome where the call did not succeed. It becomes
// a tool result with isError, never a protocol error.
type Failure struct {
	Code         Code
	Message      string
	RetryAllowed bool
	Next         *NextAction
	// Handle, when set, is the operation the failure is about (e.g. the
	// stored one a conflicting digest collided with): for audit, never shown.
	Handle string
	// Cause is the underlying error, for logs; never shown to the caller.
	Cause error
}

func (f *Failure) Error() string { return fmt.Sprintf("%s: %s", f.Code, f.Message) }

// Unwrap exposes the cause to errors.Is and errors.As.
func (f *Failure) Unwrap() error { return f.Cause }

// Fail builds a Failure.
func Fail(code Code, retryAllowed bool, next *NextAction, format string, args ...any) *Failure {
	return &Failure{Code: code, Message: fmt.Sprintf(format, args...), RetryAllowed: retryAllowed, Next: next}
}
