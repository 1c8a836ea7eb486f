package simhttp

import (
	"net/http"
	"time"
)

// DefaultHoldLimit is how long a "timeout" fault holds a request whose
// client never goes away.
const DefaultHoldLimit = 60 * time.Second

// HoldLimitOrDefault is limit, or DefaultHoldLimit when limit is not positive.
func HoldLimitOrDefault(limit time.Duration) time.Duration {
	if limit <= 0 {
		return DefaultHoldLimit
	}
	return limit
}

// ClockOrNow is clock, or time.Now when clock is nil.
func ClockOrNow(clock func() time.Time) func() time.Time {
	if clock == nil {
		return time.Now
	}
	return clock
}

// Control is what a simulator serves under SimPrefix.
type Control struct {
	// SetFaults serves POST /_sim/faults (see ServeSetFaults).
	SetFaults http.HandlerFunc
	// Stats returns what GET /_sim/stats reports.
	Stats func() any
	// Reset clears the simulator; POST /_sim/reset answers 204 after it.
	Reset func()
}

// Handler adds the control routes to mux, which already holds the
// simulator's API routes, and puts Guard in front of it all.
func Handler(mux *http.ServeMux, apiKey string, traffic *Traffic, ctl Control) http.Handler {
	mux.HandleFunc("POST /_sim/faults", ctl.SetFaults)
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, ctl.Stats())
	})
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, _ *http.Request) {
		ctl.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	return Guard(apiKey, traffic, mux)
}

// ReplaceFlag is embedded in a simulator's POST /_sim/faults body. Callers
// may state the only semantics with "replace": true; false is refused
// rather than ignored.
type ReplaceFlag struct {
	Replace *bool `json:"replace,omitempty"`
}

// ServeSetFaults answers POST /_sim/faults. body is the request value to
// decode strictly: the simulator's Faults with a ReplaceFlag embedded, which
// flag and faults point at. After the flag check, set installs *faults and
// they are echoed back; any refusal is a 400 invalid_faults.
func ServeSetFaults[F any](w http.ResponseWriter, r *http.Request, body any, flag *ReplaceFlag, faults *F, set func(F) error) {
	if err := DecodeJSON(r, body); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_faults", err.Error())
		return
	}
	if flag.Replace != nil && !*flag.Replace {
		WriteError(w, http.StatusBadRequest, "invalid_faults", "appending faults is not supported; posting replaces them")
		return
	}
	if err := set(*faults); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_faults", err.Error())
		return
	}
	WriteJSON(w, http.StatusOK, *faults)
}
