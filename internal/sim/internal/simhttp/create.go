package simhttp

import (
	"net/http"
	"time"
)

// Create fault modes that both simulators offer with the same meaning and
// the same answer; each simulator exports them under its own CreateMode.
const (
	DropResponseAfterCommit = "drop_response_after_commit"
	TimeoutBeforeCommit     = "timeout_before_commit"
	Error500BeforeCommit    = "error_500_before_commit"
	Error500AfterCommit     = "error_500_after_commit"
	Reject                  = "reject"
)

// FailBeforeCommit applies a create fault that strikes before anything is
// committed and reports whether it answered the request, in which case the
// caller must not commit. rejection is the message of a "reject" answer.
func FailBeforeCommit(w http.ResponseWriter, r *http.Request, mode string, holdLimit time.Duration, rejection string) bool {
	switch mode {
	case TimeoutBeforeCommit:
		if !Hold(r.Context(), holdLimit) {
			WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated timeout, nothing committed")
		}
		return true
	case Error500BeforeCommit:
		WriteError(w, http.StatusInternalServerError, "internal", "simulated failure before commit")
		return true
	case Reject:
		WriteError(w, http.StatusUnprocessableEntity, "rejected", rejection)
		return true
	}
	return false
}

// FailAfterCommit applies a create fault that strikes once the effect is
// committed and reports whether it answered (or dropped) the request.
func FailAfterCommit(w http.ResponseWriter, mode string) bool {
	switch mode {
	case DropResponseAfterCommit:
		if err := DropConnection(w); err != nil {
			WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		}
		return true
	case Error500AfterCommit:
		WriteError(w, http.StatusInternalServerError, "internal", "simulated failure after commit")
		return true
	}
	return false
}
