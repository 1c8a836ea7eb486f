package store

import (
	"errors"

	"github.com/intentgate/intentgate/internal/operation"
)

// Sentinel errors of the store. Typed errors below match them with errors.Is.
var (
	ErrNotFound = errors.New("operation not found")
	// ErrStale: the operation moved on since it was read (another replica, a
	// reconciler, a late event). Nothing was written.
	ErrStale = errors.New("stale operation version")
	// ErrHolderMissing: a business key names an operation that no longer
	// exists (expired by TTL while the key stayed). An operator must look.
	ErrHolderMissing = errors.New("business key held by a missing operation")
	// ErrNotWritten: the call failed before its write was sent, or every
	// attempt of it was a transaction the engine cancelled whole; nothing
	// of it is in the table.
	ErrNotWritten = errors.New("nothing was written")
	// ErrShared: a client's withdrawal refused because other request keys
	// were answered with the operation (bound to it) and wait on it too.
	// Nothing was written.
	ErrShared = errors.New("other requests were answered with this operation")
)

// StaleError carries the operation as the engine returned it when the
// condition failed, so the caller can decide without another read. Current
// is nil if the engine returned no item.
type StaleError struct {
	Handle  string
	Current *operation.Operation
}

func (e *StaleError) Error() string { return "stale operation " + e.Handle }

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }
