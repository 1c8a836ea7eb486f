package packet

import (
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// EventReconciliationCheck is the timeline name of every probe (a
// reconciliation check, docs/design.md, Review packet); JournalEvent keeps
// which probe event it was.
const EventReconciliationCheck = "reconciliation_check"

// TimelineEntry is one journal event as the review packet shows it.
type TimelineEntry struct {
	At time.Time `json:"at"`
	// Event is the timeline's published name: intent_recorded,
	// provider_dispatch_started, client_timeout, reconciliation_check, ...
	Event string `json:"event"`
	// JournalEvent is the journal's own event type, so nothing is lost
	// when several events share a timeline name.
	JournalEvent string `json:"journal_event"`
	From         string `json:"from,omitempty"`
	To           string `json:"to,omitempty"`
	Source       string `json:"source,omitempty"`
	Result       string `json:"result,omitempty"`
	ResourceID   string `json:"resource_id,omitempty"`
	// Decision is the outcome an event decided (a probe, a verification, a
	// business rejection, an operator resolution, a budget escalation).
	Decision string `json:"decision,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Timeline maps the journal one entry per event, in journal order.
func Timeline(journal []operation.Event) []TimelineEntry {
	out := make([]TimelineEntry, 0, len(journal))
	for _, ev := range journal {
		e := TimelineEntry{
			At:           ev.At,
			Event:        string(ev.Type),
			JournalEvent: string(ev.Type),
			From:         string(ev.From),
			To:           string(ev.To),
			Source:       ev.Source,
			Result:       ev.Result,
			ResourceID:   ev.ResourceID,
			Detail:       ev.Detail,
		}
		if isProbe(ev.Type) {
			e.Event = EventReconciliationCheck
			if e.Source == "" {
				e.Source = "reconciler"
			}
			if e.Result == "" {
				e.Result = probeResult(ev.Type)
			}
		}
		if decides(ev.Type) {
			e.Decision = string(ev.Outcome)
		}
		out = append(out, e)
	}
	return out
}

func isProbe(t operation.EventType) bool {
	switch t {
	case operation.EventProbeFoundOne, operation.EventProbeNotFound,
		operation.EventProbeInconclusive, operation.EventProbeMultiple,
		operation.EventAuditClean, operation.EventAuditDeferred, operation.EventAuditMultiple:
		return true
	}
	return false
}

// probeResult names a probe's result when the reconciler recorded none.
func probeResult(t operation.EventType) string {
	switch t {
	case operation.EventProbeFoundOne:
		return "one_exact_match"
	case operation.EventProbeNotFound:
		return "no_match_authoritative"
	case operation.EventProbeMultiple, operation.EventAuditMultiple:
		return "multiple_matches"
	}
	return "inconclusive"
}

// decides reports whether the event's outcome is a decision worth showing
// (the timeline's decision), as opposed to a classification of a lost wait.
func decides(t operation.EventType) bool {
	switch t {
	case operation.EventIntentRecorded, operation.EventDispatchStarted,
		operation.EventClientTimeout, operation.EventResponseMissing,
		operation.EventDispatcherLost, operation.EventRetryClaimed:
		return false
	}
	return true
}
