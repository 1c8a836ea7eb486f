package operation

import (
	"errors"
	"fmt"
)

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	ErrInvalid           = errors.New("invalid operation input")
	ErrIllegalTransition = errors.New("illegal transition")
	ErrJournalFull       = errors.New("journal full")
)

// ValidationError says which field is wrong and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, reason string) error { return &ValidationError{Field: field, Reason: reason} }

// TransitionError is a (state, event) pair the table refuses.
type TransitionError struct {
	From  State
	Event EventType
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal transition: %s does not accept %s", e.From, e.Event)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }
