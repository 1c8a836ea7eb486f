package chaos

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// The seven invariants, numbered as docs/chaos.md lists them.
const (
	InvOneEffect      = 1 // per business key at most one effect, unless an ESCALATED incident names every effect
	InvSettled        = 2 // every operation SUCCEEDED, FAILED or ESCALATED
	InvFirstAnswer    = 3 // every answer for an operation_id agrees with the first
	InvEffectMatches  = 4 // SUCCEEDED has its effect; FAILED has none
	InvJournal        = 5 // versions strictly increase; every step is in the transition table
	InvTenantIsolated = 6 // no answer shows one tenant another tenant's operation
	InvBackpressure   = 7 // downstream in flight within the cap; OVERLOADED is fast; a held burst is refused beyond the gate
)

// InvariantNames are the short names used in the summary.
var InvariantNames = map[int]string{
	InvOneEffect: "one effect per business key", InvSettled: "settled after quiet",
	InvFirstAnswer: "answers agree with the first", InvEffectMatches: "state matches provider",
	InvJournal: "journal monotonic and legal", InvTenantIsolated: "tenant isolation",
	InvBackpressure: "backpressure",
}

// OpRecord is an operation the campaign may have created, with its final
// state read from the table (nil: never stored).
type OpRecord struct {
	Cell        int
	Handle      string
	Persona     string
	Tenant      string
	ClientID    string
	Tool        string
	OperationID string
	EffectKey   string // business fact the provider's effects are counted by
	Final       *operation.Operation
	// BusinessKeyHolder is the handle the table's business-key item of
	// Final names ("" when the fact is free), read after the quiet phase.
	BusinessKeyHolder string
}

// Evidence is everything the checker judges: the history, the final
// table, and the providers' records.
type Evidence struct {
	Seed    uint64
	History History
	Ops     []OpRecord
	// EffectsByKey: resource ids at the provider per business fact
	// (cell-qualified EffectKey).
	EffectsByKey map[string][]string
	// ExcusedByKey: per ticket target (cell-qualified EffectKey), the
	// tickets the Release simulator made by breaking its own promises; an
	// incident may excuse those, and no more.
	ExcusedByKey map[string]int
	// RiskByHandle: risk reviews created with the handle as request key.
	RiskByHandle map[string][]string
	// TicketOrigins: how the Release simulator came to commit each ticket
	// of a target that has more than one (cell-qualified ticket id), for
	// the report of a broken invariant 1.
	TicketOrigins map[string]string
	// MaxInFlight per cell and provider ("0/risk"), and its cap.
	MaxInFlight   map[string]int
	InFlightCap   map[string]int
	MaxQueueWait  time.Duration
	OverloadSlack time.Duration
	// GateMaxInFlight and GateMaxQueue are every replica's admission gate:
	// slots and queue places (INTENTGATE_MAX_IN_FLIGHT, _MAX_QUEUE).
	GateMaxInFlight int
	GateMaxQueue    int
	// ClockSkewBound is every process's INTENTGATE_CLOCK_SKEW_BOUND: how far
	// a journal's times may be from the campaign's.
	ClockSkewBound time.Duration
}

// Violation is one broken invariant.
type Violation struct {
	Invariant int
	Cell      int
	Handle    string
	// OperationID and Persona name the caller's key when the violation is
	// about answers.
	OperationID string
	Persona     string
	Detail      string
}

func (v Violation) String() string {
	return fmt.Sprintf("invariant %d (%s) cell %d handle %s: %s", v.Invariant, InvariantNames[v.Invariant], v.Cell, v.Handle, v.Detail)
}

// Check evaluates the seven invariants, in order, and returns every
// violation (the first is the first invariant broken).
func Check(ev Evidence) []Violation {
	var out []Violation
	out = append(out, checkOneEffect(ev)...)
	out = append(out, checkSettled(ev)...)
	out = append(out, checkFirstAnswer(ev)...)
	out = append(out, checkEffectMatches(ev)...)
	out = append(out, checkJournal(ev)...)
	out = append(out, checkTenants(ev)...)
	out = append(out, checkBackpressure(ev)...)
	return out
}

func cellKey(cell int, k string) string { return fmt.Sprintf("%d/%s", cell, k) }

func checkOneEffect(ev Evidence) []Violation {
	byKey := map[string][]OpRecord{}
	for _, r := range ev.Ops {
		if r.Final != nil {
			byKey[cellKey(r.Cell, r.EffectKey)] = append(byKey[cellKey(r.Cell, r.EffectKey)], r)
		}
	}
	var out []Violation
	for _, key := range sortedKeys(ev.EffectsByKey) {
		effects := ev.EffectsByKey[key]
		if len(effects) <= 1 {
			continue
		}
		ops := byKey[key]
		if strings.HasPrefix(strings.SplitN(key, "/", 2)[1], "ticket|") && len(effects) > 1+ev.ExcusedByKey[key] {
			// An incident names duplicates; it does not excuse ones the
			// provider's broken promises cannot explain: those are ours.
			v := Violation{Invariant: InvOneEffect, Detail: fmt.Sprintf("business key %s has %d tickets %v, but the provider broke its promise only %d time(s) there: the others are this server's",
				key, len(effects), effects, ev.ExcusedByKey[key])}
			if len(ops) > 0 {
				v.Cell, v.Handle = ops[0].Cell, ops[0].Handle
			}
			out = append(out, v)
			continue
		}
		if reportedAfterFailure(ops, effects) {
			continue
		}
		var unnamed []string
		named := slices.ContainsFunc(ops, func(r OpRecord) bool {
			if r.Final.State != operation.StateEscalated || r.Final.Outcome != operation.OutcomeIncidentMultipleEffects ||
				r.Final.DuplicateResources < len(effects) {
				return false
			}
			if r.Tool != toolTicket {
				return true // risk reviews are counted per order; their ids are not all known
			}
			unnamed = notNamed(effects, incidentIDs(*r.Final))
			return len(unnamed) == 0
		})
		if named {
			continue
		}
		detail := fmt.Sprintf("business key %s has %d effects %v and no ESCALATED incident names them all", key, len(effects), effects)
		if len(unnamed) > 0 {
			detail += fmt.Sprintf(" (the incident does not name %v)", unnamed)
		}
		v := Violation{Invariant: InvOneEffect, Detail: detail}
		if len(ops) > 0 {
			v.Cell, v.Handle = ops[0].Cell, ops[0].Handle
		}
		out = append(out, v)
	}
	return append(out, checkBusinessKeyHolders(ev)...)
}

// checkBusinessKeyHolders: every operation that is not FAILED holds its
// business key in the table (else the same fact could be created again),
// and a FAILED one holds it no more (else the fact, proven not created,
// could never be asked for again).
func checkBusinessKeyHolders(ev Evidence) []Violation {
	var out []Violation
	seen := map[string]bool{}
	for _, r := range ev.Ops {
		if r.Final == nil || seen[cellKey(r.Cell, r.Final.Handle)] {
			continue
		}
		seen[cellKey(r.Cell, r.Final.Handle)] = true
		holds := r.BusinessKeyHolder == r.Final.Handle
		var detail string
		switch {
		case r.Final.State == operation.StateFailed && holds:
			detail = fmt.Sprintf("%s is FAILED but still holds business key %s: the fact can never be asked for again", r.Final.Handle, r.Final.BusinessKey)
		case r.Final.State != operation.StateFailed && !holds:
			detail = fmt.Sprintf("%s is %s but business key %s is held by %q: the fact could be created again", r.Final.Handle, r.Final.State, r.Final.BusinessKey, r.BusinessKeyHolder)
		default:
			continue
		}
		out = append(out, Violation{Invariant: InvOneEffect, Cell: r.Cell, Handle: r.Final.Handle, OperationID: r.OperationID, Persona: r.Persona, Detail: detail})
	}
	return out
}

// reportedAfterFailure: every effect on the key but at most one (the
// holder's) is reported on a FAILED operation of the key, open or closed
// by an operator since. That is the incident of an effect made after the
// operation was recorded as having none: a withdrawal's audit, or a stale
// dispatcher, found it.
func reportedAfterFailure(ops []OpRecord, effects []string) bool {
	var reported []string
	for _, r := range ops {
		if r.Final.State == operation.StateFailed {
			reported = append(reported, afterFailure(*r.Final)...)
		}
	}
	return len(reported) > 0 && len(notNamed(effects, reported)) <= 1
}

// afterFailure: the effects reported on op after it FAILED, open or
// closed by an operator since.
func afterFailure(op operation.Operation) []string {
	return append(op.EffectsReportedAfterFailure(), op.EffectsClosedAfterFailure()...)
}

// incidentIDs are the resource ids an operation's incident events name
// ("... matching effects [ticket-1, ticket-2] ..."), with every id its
// journal recorded as a resource.
func incidentIDs(op operation.Operation) []string {
	var ids []string
	for _, e := range op.Journal {
		if e.ResourceID != "" {
			ids = append(ids, e.ResourceID)
		}
		if e.Type != operation.EventProbeMultiple && e.Type != operation.EventAuditMultiple {
			continue
		}
		open, end := strings.Index(e.Detail, "["), strings.Index(e.Detail, "]")
		if open < 0 || end < open {
			continue
		}
		for _, id := range strings.Split(e.Detail[open+1:end], ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// notNamed lists the effects missing from named.
func notNamed(effects, named []string) []string {
	var out []string
	for _, id := range effects {
		if !slices.Contains(named, id) {
			out = append(out, id)
		}
	}
	return out
}

func checkSettled(ev Evidence) []Violation {
	var out []Violation
	for _, r := range ev.Ops {
		if r.Final == nil {
			continue
		}
		switch r.Final.State {
		case operation.StateFailed:
			if r.Final.WithdrawalAuditPending() {
				out = append(out, Violation{Invariant: InvSettled, Cell: r.Cell, Handle: r.Handle,
					Detail: "withdrawn, with its audit still due after the quiet phase"})
			}
		case operation.StateSucceeded, operation.StateEscalated:
		default:
			out = append(out, Violation{Invariant: InvSettled, Cell: r.Cell, Handle: r.Handle,
				Detail: fmt.Sprintf("left %s (%s) after the quiet phase", r.Final.State, r.Final.Outcome)})
		}
	}
	return out
}

// answerKey names one caller's operation_id: client, tool and id, as the
// server scopes it, per persona (each persona is one tenant).
type answerKey struct {
	cell                  int
	client, tool, persona string
	opID                  string
}

var transientCodes = map[string]bool{"OVERLOADED": true, "TEMPORARY_UNAVAILABLE": true, "UNAUTHENTICATED": true}

func checkFirstAnswer(ev Evidence) []Violation {
	clients := map[string]string{}
	for _, p := range personaByName {
		clients[p.Name] = p.ClientID
	}
	byKey := map[answerKey][]Call{}
	var keys []answerKey
	for _, c := range ev.History.Calls {
		if c.OperationID == "" || (c.Tool != toolRisk && c.Tool != toolTicket) || !c.Answered() {
			continue
		}
		k := answerKey{c.Cell, clients[c.Persona], c.Tool, c.Persona, c.OperationID}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	finals := map[string]*operation.Operation{}
	for _, r := range ev.Ops {
		finals[cellKey(r.Cell, r.Handle)] = r.Final
	}
	var out []Violation
	for _, k := range keys {
		calls := byKey[k]
		sort.SliceStable(calls, func(i, j int) bool { return calls[i].End.Before(calls[j].End) })
		own := handleOf(k.client, personaByName[k.persona].Merchant, personaByName[k.persona].Subject, k.tool, k.opID)
		final := finals[cellKey(k.cell, own)]
		// A key answered by deduplication is bound to the holder: reading
		// its handle gives the holder's operation, whose payload is the
		// holder's request, not this key's. The key stays bound to the
		// arguments of its own first answer (the binding's digest), so
		// that is what later calls must match.
		bound := final != nil && final.Handle != own
		var boundArgs map[string]any
		boundBy := 0
		var first *Call
		for i := range calls {
			c := calls[i]
			if transientCodes[c.Code] {
				continue
			}
			bad := func(format string, a ...any) {
				out = append(out, Violation{Invariant: InvFirstAnswer, Cell: k.cell, Handle: own, OperationID: k.opID, Persona: k.persona,
					Detail: fmt.Sprintf("call #%d: ", c.Seq) + fmt.Sprintf(format, a...)})
			}
			if bound && boundArgs != nil && !sameCallArgs(c.Args, boundArgs) {
				if c.Code != "IDEMPOTENCY_CONFLICT" {
					bad("operation_id bound by its first answer (call #%d) reused with other arguments answered %q (status %s, handle %s), not IDEMPOTENCY_CONFLICT", boundBy, c.Code, c.Status, c.Handle)
				}
				continue
			}
			// Other arguments than the stored operation's, once it exists:
			// always a conflict. (Before the insert, a call with other
			// arguments may be deduplicated to another operation.)
			if !bound && final != nil && !final.CreatedAt.After(c.End) && !sameArgs(c.Args, final.Payload) {
				if c.Code != "IDEMPOTENCY_CONFLICT" {
					bad("operation_id reused with other arguments answered %q (status %s, handle %s), not IDEMPOTENCY_CONFLICT", c.Code, c.Status, c.Handle)
				}
				continue
			}
			if c.Code == "IDEMPOTENCY_CONFLICT" || c.Handle == "" {
				continue
			}
			if first == nil {
				first = &calls[i]
				if bound {
					boundArgs, boundBy = c.Args, c.Seq
				}
				continue
			}
			if c.Handle != first.Handle {
				bad("answered handle %s (%s), the first answer (call #%d) named %s (%s)", c.Handle, c.Status, first.Seq, first.Handle, first.Status)
				continue
			}
			if first.Status == string(operation.StateSucceeded) && (c.Status != first.Status || c.ResourceID != first.ResourceID) &&
				!(c.Status == string(operation.StateEscalated) && c.ResourceID == first.ResourceID && auditReversed(final, *first, ev.ClockSkewBound)) {
				bad("answered %s resource %q after call #%d answered SUCCEEDED resource %q", c.Status, c.ResourceID, first.Seq, first.ResourceID)
			}
			if first.Status == string(operation.StateFailed) && c.Status != first.Status {
				bad("answered %s after call #%d answered FAILED", c.Status, first.Seq)
			}
			if c.Status == string(operation.StateSucceeded) || c.Status == string(operation.StateFailed) {
				first = &calls[i] // a settled answer is what later answers must keep
			}
		}
		if first != nil && final != nil && first.Handle == own {
			switch {
			case first.Status == string(operation.StateSucceeded) && (final.State != operation.StateSucceeded || final.ResourceID != first.ResourceID) &&
				!(final.State == operation.StateEscalated && final.ResourceID == first.ResourceID && auditReversed(final, *first, ev.ClockSkewBound)):
				out = append(out, Violation{Invariant: InvFirstAnswer, Cell: k.cell, Handle: own, OperationID: k.opID, Persona: k.persona,
					Detail: fmt.Sprintf("answered SUCCEEDED resource %q, the table ends %s resource %q", first.ResourceID, final.State, final.ResourceID)})
			case first.Status == string(operation.StateFailed) && final.State != operation.StateFailed:
				out = append(out, Violation{Invariant: InvFirstAnswer, Cell: k.cell, Handle: own, OperationID: k.opID, Persona: k.persona,
					Detail: fmt.Sprintf("answered FAILED, the table ends %s", final.State)})
			}
		}
	}
	for _, u := range unjustifiedConflicts(ev.History.Calls) {
		c := u.call
		out = append(out, Violation{Invariant: InvFirstAnswer, Cell: c.Cell, Handle: u.key.handle(), OperationID: c.OperationID, Persona: c.Persona,
			Detail: fmt.Sprintf("call #%d answered IDEMPOTENCY_CONFLICT, but no call of its key (client %s, tenant %s, %s) with other arguments (and not refused as a conflict) had started before it was answered", c.Seq, u.key.client, u.key.tenant, c.Tool)})
	}
	return out
}

// auditReversed reports whether answer, a SUCCEEDED, came while op's
// duplicate audit was due and that audit then raised the incident op ends
// in: SUCCEEDED is final except for that audit (docs/design.md), and the
// answer, given while it was due, said to wait. The answer must have
// started before the audit's event, by the journal's clock, plus the skew
// bound; one read after the incident is a stale answer. An extra send of
// the server's own that such an audit finds is not excused here but by
// nothing: invariant 1 counts the tickets only the provider's broken
// promises may explain.
func auditReversed(op *operation.Operation, answer Call, skewBound time.Duration) bool {
	if op == nil || op.State != operation.StateEscalated {
		return false
	}
	for i, ev := range op.Journal {
		if ev.Type != operation.EventAuditMultiple || ev.From != operation.StateSucceeded {
			continue
		}
		return scheduledAudit(op.Journal[:i]) && answer.Start.Before(ev.At.Add(skewBound))
	}
	return false
}

// scheduledAudit: the event that made the operation SUCCEEDED set its
// duplicate audit due.
func scheduledAudit(journal []operation.Event) bool {
	for i := len(journal) - 1; i >= 0; i-- {
		if ev := journal[i]; ev.To == operation.StateSucceeded && ev.From != operation.StateSucceeded {
			return !ev.NextAt.IsZero()
		}
	}
	return false
}

// sameArgs compares a call's arguments with a stored operation's payload
// on the fields the caller chose.
func sameArgs(args map[string]any, payload map[string]string) bool {
	for k, v := range args {
		if k == "operation_id" {
			continue
		}
		s, _ := v.(string)
		if p, ok := payload[k]; ok && p != s {
			return false
		}
	}
	return true
}

// sameCallArgs compares two calls' arguments, the operation_id aside.
func sameCallArgs(a, b map[string]any) bool {
	for _, m := range [2][2]map[string]any{{a, b}, {b, a}} {
		for k, v := range m[0] {
			if k == "operation_id" {
				continue
			}
			if w, ok := m[1][k]; !ok || fmt.Sprint(w) != fmt.Sprint(v) {
				return false
			}
		}
	}
	return true
}

// scopeKey is a request key as the server scopes it: the operation_id
// per client, tenant, end user and tool, read from the history alone (not
// from the server's key code, which a fault in the scope would bend too).
type scopeKey struct {
	cell                                int
	client, tenant, subject, tool, opID string
}

func (k scopeKey) handle() string { return handleOf(k.client, k.tenant, k.subject, k.tool, k.opID) }

// scopeOf is a write call's key; ok is false for calls without one.
func scopeOf(c Call) (scopeKey, bool) {
	p, known := personaByName[c.Persona]
	if !known || c.OperationID == "" || (c.Tool != toolRisk && c.Tool != toolTicket) {
		return scopeKey{}, false
	}
	return scopeKey{c.Cell, p.ClientID, p.Merchant, p.Subject, c.Tool, c.OperationID}, true
}

// unjustifiedConflict is an IDEMPOTENCY_CONFLICT its key never earned;
// others are the tenants of the other scopes (another tenant, or another
// user of the same one) whose calls with the same client, tool and
// operation_id, and other arguments, had started (what it leaks).
type unjustifiedConflict struct {
	call   Call
	key    scopeKey
	others []string
}

// unjustifiedConflicts lists the IDEMPOTENCY_CONFLICT answers to calls
// whose key held no other arguments: no call of that key with other
// arguments, not itself refused as a conflict, started before the
// conflict's answer ended. Calls without an answer count (their insert
// may have applied), and so do concurrent ones (the first insert wins).
func unjustifiedConflicts(calls []Call) []unjustifiedConflict {
	type shared struct {
		cell               int
		client, tool, opID string
	}
	byScope := map[scopeKey][]Call{}
	byID := map[shared][]Call{}
	for _, c := range calls {
		if k, ok := scopeOf(c); ok {
			byScope[k] = append(byScope[k], c)
			byID[shared{k.cell, k.client, k.tool, k.opID}] = append(byID[shared{k.cell, k.client, k.tool, k.opID}], c)
		}
	}
	// A call never explains itself (its arguments are its own), nor does
	// a conflict explain another: it stored nothing.
	explains := func(d, c Call) bool {
		return d.Start.Before(c.End) && !sameCallArgs(d.Args, c.Args) && !(d.Answered() && d.Code == "IDEMPOTENCY_CONFLICT")
	}
	var out []unjustifiedConflict
	for _, c := range calls {
		k, ok := scopeOf(c)
		if !ok || !c.Answered() || c.Code != "IDEMPOTENCY_CONFLICT" {
			continue
		}
		if slices.ContainsFunc(byScope[k], func(d Call) bool { return explains(d, c) }) {
			continue
		}
		u := unjustifiedConflict{call: c, key: k}
		for _, d := range byID[shared{k.cell, k.client, k.tool, k.opID}] {
			other := personaByName[d.Persona]
			if t := other.Merchant; (t != k.tenant || other.Subject != k.subject) && explains(d, c) && !slices.Contains(u.others, t) {
				u.others = append(u.others, t)
			}
		}
		out = append(out, u)
	}
	return out
}

func checkEffectMatches(ev Evidence) []Violation {
	var out []Violation
	// Effects owned by SUCCEEDED or ESCALATED operations, per key, and
	// those a FAILED one reports as made after it failed (the incident an
	// operator closes).
	claimed := map[string]int{}
	for _, r := range ev.Ops {
		switch {
		case r.Final == nil:
		case r.Final.State == operation.StateSucceeded || r.Final.State == operation.StateEscalated:
			claimed[cellKey(r.Cell, r.EffectKey)] += max(1, r.Final.DuplicateResources)
		case r.Final.State == operation.StateFailed:
			claimed[cellKey(r.Cell, r.EffectKey)] += len(afterFailure(*r.Final))
		}
	}
	for _, r := range ev.Ops {
		if r.Final == nil {
			continue
		}
		key := cellKey(r.Cell, r.EffectKey)
		switch r.Final.State {
		case operation.StateSucceeded:
			present := ev.EffectsByKey[key]
			if r.Tool == toolRisk {
				present = ev.RiskByHandle[cellKey(r.Cell, r.Handle)]
			}
			if r.Final.ResourceID == "" || !slices.Contains(present, r.Final.ResourceID) {
				out = append(out, Violation{Invariant: InvEffectMatches, Cell: r.Cell, Handle: r.Handle,
					Detail: fmt.Sprintf("SUCCEEDED with resource %q, the provider has %v", r.Final.ResourceID, present)})
			}
		case operation.StateFailed:
			if r.Tool == toolRisk {
				if found := notNamed(ev.RiskByHandle[cellKey(r.Cell, r.Handle)], afterFailure(*r.Final)); len(found) > 0 {
					out = append(out, Violation{Invariant: InvEffectMatches, Cell: r.Cell, Handle: r.Handle,
						Detail: fmt.Sprintf("FAILED, but the provider holds %v created with its request key", found)})
				}
			} else if n := len(ev.EffectsByKey[key]); n > claimed[key] {
				out = append(out, Violation{Invariant: InvEffectMatches, Cell: r.Cell, Handle: r.Handle,
					Detail: fmt.Sprintf("FAILED, and its target has %d tickets %v of which only %d belong to a SUCCEEDED or ESCALATED operation", n, ev.EffectsByKey[key], claimed[key])})
			}
		}
	}
	return out
}

func checkJournal(ev Evidence) []Violation {
	var out []Violation
	for _, r := range ev.Ops {
		var reads []operation.Operation
		for _, s := range ev.History.Snapshots[r.Handle] {
			reads = append(reads, s.Op)
		}
		if r.Final != nil {
			reads = append(reads, *r.Final)
		}
		for i, op := range reads {
			if d := journalProblem(op); d != "" {
				out = append(out, Violation{Invariant: InvJournal, Cell: r.Cell, Handle: r.Handle, Detail: d})
				break
			}
			if i == 0 {
				continue
			}
			prev := reads[i-1]
			if op.Version < prev.Version {
				out = append(out, Violation{Invariant: InvJournal, Cell: r.Cell, Handle: r.Handle,
					Detail: fmt.Sprintf("version went back from %d to %d between reads", prev.Version, op.Version)})
				break
			}
			if !journalExtends(prev.Journal, op.Journal) {
				out = append(out, Violation{Invariant: InvJournal, Cell: r.Cell, Handle: r.Handle,
					Detail: fmt.Sprintf("journal at version %d does not extend the one read at version %d", op.Version, prev.Version)})
				break
			}
		}
	}
	return out
}

// journalProblem checks one read: each transition event leaves the state
// the previous one entered, is allowed by the transition table, and the
// version counts exactly the transitions.
func journalProblem(op operation.Operation) string {
	state := operation.StatePending
	transitions := int64(0)
	reported := false // an effect reported after the operation FAILED, not yet closed
	for i, e := range op.Journal {
		if !slices.Contains(operation.TransitionEvents(), e.Type) {
			continue
		}
		to, ok := operation.Next(e.From, e.Type)
		switch {
		case e.From != state:
			return fmt.Sprintf("journal event %d (%s) leaves %s, but the operation was %s", i, e.Type, e.From, state)
		case !ok || to != e.To:
			return fmt.Sprintf("journal event %d: %s -%s-> %s is not in the transition table", i, e.From, e.Type, e.To)
		case e.From == operation.StateFailed && e.Type == operation.EventOperatorFailed && !reported:
			return fmt.Sprintf("journal event %d: a FAILED operation closed with no effect reported after it failed", i)
		}
		if e.From == operation.StateFailed {
			reported = (e.Type == operation.EventEvidenceRecorded && e.ResourceID != "") || (reported && e.Type != operation.EventOperatorFailed)
		}
		state = to
		transitions++
	}
	if state != op.State {
		return fmt.Sprintf("journal ends in %s, the operation is %s", state, op.State)
	}
	if op.Version != 1+transitions {
		return fmt.Sprintf("version %d after %d transitions (want %d)", op.Version, transitions, 1+transitions)
	}
	return ""
}

func journalExtends(prev, next []operation.Event) bool {
	if len(next) < len(prev) {
		return false
	}
	for i := range prev {
		a, b := prev[i], next[i]
		if a.Type != b.Type || !a.At.Equal(b.At) || a.WriteID != b.WriteID {
			return false
		}
	}
	return true
}

func checkTenants(ev Evidence) []Violation {
	tenantOf := map[string]string{}
	for _, r := range ev.Ops {
		if r.Final != nil {
			tenantOf[cellKey(r.Cell, r.Handle)] = r.Final.TenantID
		}
	}
	var out []Violation
	for _, c := range ev.History.Calls {
		p, ok := personaByName[c.Persona]
		if !ok || c.Persona == "OPERATOR" || !c.Answered() || c.Handle == "" {
			continue
		}
		t, known := tenantOf[cellKey(c.Cell, c.Handle)]
		if known && t != p.Merchant {
			out = append(out, Violation{Invariant: InvTenantIsolated, Cell: c.Cell, Handle: c.Handle, OperationID: c.OperationID, Persona: c.Persona,
				Detail: fmt.Sprintf("call #%d %s by %s (tenant %s) was answered %s/%s with an operation of tenant %s", c.Seq, c.Tool, c.Persona, p.Merchant, c.Code, c.Status, t)})
		}
	}
	for _, u := range unjustifiedConflicts(ev.History.Calls) {
		if len(u.others) == 0 {
			continue
		}
		c := u.call
		out = append(out, Violation{Invariant: InvTenantIsolated, Cell: c.Cell, Handle: u.key.handle(), OperationID: c.OperationID, Persona: c.Persona,
			Detail: fmt.Sprintf("call #%d %s by %s (tenant %s) was answered IDEMPOTENCY_CONFLICT, which only tenant %v's use of the operation_id explains", c.Seq, c.Tool, c.Persona, u.key.tenant, u.others)})
	}
	return out
}

func checkBackpressure(ev Evidence) []Violation {
	var out []Violation
	for _, k := range sortedKeys(ev.MaxInFlight) {
		if limit, ok := ev.InFlightCap[k]; ok && ev.MaxInFlight[k] > limit {
			out = append(out, Violation{Invariant: InvBackpressure, Detail: fmt.Sprintf("%s: %d downstream requests in flight, cap %d", k, ev.MaxInFlight[k], limit)})
		}
	}
	for _, c := range ev.History.Calls {
		if c.Code != "OVERLOADED" {
			continue
		}
		if took := c.End.Sub(c.Start); took > ev.MaxQueueWait+ev.OverloadSlack || !c.RetryAllowed {
			out = append(out, Violation{Invariant: InvBackpressure, Cell: c.Cell, Handle: c.Handle, OperationID: c.OperationID, Persona: c.Persona,
				Detail: fmt.Sprintf("call #%d OVERLOADED after %s (queue wait %s + slack %s), retry_allowed %v", c.Seq, took.Round(time.Millisecond), ev.MaxQueueWait, ev.OverloadSlack, c.RetryAllowed)})
		}
	}
	if ev.GateMaxInFlight > 0 {
		for _, b := range ev.History.Bursts {
			out = append(out, checkBurst(ev, b)...)
		}
	}
	return out
}

// checkBurst judges what one replica's gate let in of a burst whose
// inserts were held (Burst). A write holds its gate slot from admission
// until its insert has returned, so:
//
//   - inserts held at once in one replica process can never outnumber
//     the gate's slots. Always judged: a hold's interval lies inside its
//     call's slot, whatever else happened;
//   - a complete hold (lifted only once every burst call was answered or
//     held) means every call that passed its insert was held at the
//     release, at most the slots; every other call was refused, at the
//     gate (OVERLOADED) or before its insert (another error code and no
//     handle, e.g. a failed ownership lookup). So at least
//     size - slots - queue - others OVERLOADED answers (the queue places
//     are slack, not needed by the argument). Such others are why a risk
//     burst whose ownership lookups all time out (a provider latency
//     spike) tells nothing about the gate. Judged only when the replica was neither stopped nor
//     restarted between the burst's first start and last end (a new
//     process has a fresh gate) and every call was answered (an
//     unanswered one may have been admitted, or never arrived).
func checkBurst(ev Evidence, b Burst) []Violation {
	var out []Violation
	bad := func(format string, a ...any) {
		out = append(out, Violation{Invariant: InvBackpressure, Cell: b.Cell, OperationID: b.OperationID,
			Detail: fmt.Sprintf("burst of plan %d (%d writes at replica %d): ", b.Plan, b.Size, b.Replica) + fmt.Sprintf(format, a...)})
	}
	byProcess := map[string][]Hold{}
	for _, h := range b.Holds {
		if !h.To.IsZero() { // an unfinished hold has no known end; leaving it out never invents an overlap
			byProcess[h.Process] = append(byProcess[h.Process], h)
		}
	}
	for _, proc := range sortedKeys(byProcess) {
		if n := maxOverlap(byProcess[proc]); n > ev.GateMaxInFlight {
			bad("%d of its inserts were held at once in %s, whose gate has %d slots", n, proc, ev.GateMaxInFlight)
		}
	}

	if !b.Complete || b.Released.IsZero() || len(b.Calls) != b.Size || b.Size <= ev.GateMaxInFlight+ev.GateMaxQueue {
		return out
	}
	bySeq := map[int]Call{}
	for _, c := range ev.History.Calls {
		bySeq[c.Seq] = c
	}
	var first, last time.Time
	overloaded, others := 0, 0
	for i, seq := range b.Calls {
		c, ok := bySeq[seq]
		if !ok || !c.Answered() {
			return out
		}
		if i == 0 || c.Start.Before(first) {
			first = c.Start
		}
		if i == 0 || c.End.After(last) {
			last = c.End
		}
		switch {
		case c.Code == "OVERLOADED":
			overloaded++
		case c.IsError && c.Handle == "":
			// Refused without an operation: maybe before its insert (a
			// failed ownership lookup), having freed its slot early. An
			// answer naming a handle passed its insert.
			others++
		}
	}
	replica := fmt.Sprintf("replica %d", b.Replica)
	for _, f := range ev.History.Faults {
		if f.Cell == b.Cell && f.Detail == replica && (f.Kind == FaultReplicaStopped || f.Kind == FaultReplicaRestarted) &&
			!f.At.Before(first) && !f.At.After(last) {
			return out
		}
	}
	if want := b.Size - ev.GateMaxInFlight - ev.GateMaxQueue - others; overloaded < want {
		bad("%d OVERLOADED answers, at least %d required: its inserts were held until every call was answered or held, "+
			"so at most %d slots + %d queue places could admit one (%d refused with another code)",
			overloaded, want, ev.GateMaxInFlight, ev.GateMaxQueue, others)
	}
	return out
}

// maxOverlap is the largest number of holds in progress at one instant.
// Holds that end exactly when another starts do not overlap.
func maxOverlap(holds []Hold) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(holds))
	for _, h := range holds {
		edges = append(edges, edge{h.From, +1}, edge{h.To, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // ends first
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PrintViolation writes the seed, the first invariant broken and the
// operation's full history: every call naming it, the faults aimed at
// it, every read of it and its final journal.
func PrintViolation(w io.Writer, ev Evidence, v Violation) {
	fmt.Fprintf(w, "VIOLATION seed=%d\n  first invariant broken: %s\n", ev.Seed, v)
	var rec *OpRecord
	for i := range ev.Ops {
		if ev.Ops[i].Cell == v.Cell && ev.Ops[i].Handle == v.Handle {
			rec = &ev.Ops[i]
		}
	}
	opID := v.OperationID
	if rec != nil {
		fmt.Fprintf(w, "  operation: %s %s by %s operation_id %s business %s\n", rec.Handle, rec.Tool, rec.Persona, rec.OperationID, rec.EffectKey)
		if opID == "" {
			opID = rec.OperationID
		}
	}
	fmt.Fprintln(w, "  calls:")
	for _, c := range ev.History.Calls {
		if c.Cell != v.Cell || !(c.Handle == v.Handle && v.Handle != "" || opID != "" && strings.HasPrefix(c.OperationID, opID) || argsName(c.Args, v.Handle)) {
			continue
		}
		ans := fmt.Sprintf("code=%s status=%s outcome=%s handle=%s resource=%s dedup=%v", c.Code, c.Status, c.Outcome, c.Handle, c.ResourceID, c.Deduplicated)
		if !c.Answered() {
			ans = "no answer: " + c.TransportError
		}
		fmt.Fprintf(w, "    #%d %s %s@replica%d %s %v changed=%v [%s] -> %s\n", c.Seq, c.Start.Format("15:04:05.000"), c.Persona, c.Replica, c.Tool, c.Args, c.ArgsChanged, c.End.Sub(c.Start).Round(time.Millisecond), ans)
	}
	fmt.Fprintln(w, "  faults aimed at it:")
	for _, f := range ev.History.Faults {
		if f.Cell == v.Cell && (f.Handle != "" && f.Handle == v.Handle || opID != "" && f.Detail == opID) {
			fmt.Fprintf(w, "    #%d %s %s %s\n", f.Seq, f.At.Format("15:04:05.000"), f.Kind, f.Detail)
		}
	}
	fmt.Fprintln(w, "  reads from the table:")
	for _, s := range ev.History.Snapshots[v.Handle] {
		fmt.Fprintf(w, "    #%d v%d %s %s resource=%s\n", s.Seq, s.Op.Version, s.Op.State, s.Op.Outcome, s.Op.ResourceID)
	}
	if rec != nil && rec.Final != nil {
		fmt.Fprintf(w, "  final: v%d %s %s resource=%s duplicates=%d escalation=%q\n  journal:\n", rec.Final.Version, rec.Final.State, rec.Final.Outcome, rec.Final.ResourceID, rec.Final.DuplicateResources, rec.Final.Escalation)
		for _, e := range rec.Final.Journal {
			fmt.Fprintf(w, "    %s\n", journalLine(e))
		}
		fmt.Fprintf(w, "  provider effects for %s: %v\n", rec.EffectKey, ev.EffectsByKey[cellKey(rec.Cell, rec.EffectKey)])
	}
	if v.Invariant == InvOneEffect && rec != nil {
		printBusinessKey(w, ev, *rec)
	}
}

// printBusinessKey writes, for a business key with more than one effect,
// how the provider came to make each (tickets) and every other operation
// the campaign stored on the key, with its calls and final journal: the
// second effect is one of theirs or a broken promise, and the report
// should say which without a replay.
func printBusinessKey(w io.Writer, ev Evidence, rec OpRecord) {
	for _, id := range ev.EffectsByKey[cellKey(rec.Cell, rec.EffectKey)] {
		if origin, ok := ev.TicketOrigins[cellKey(rec.Cell, id)]; ok {
			fmt.Fprintf(w, "  %s: %s\n", id, origin)
		}
	}
	for _, other := range ev.Ops {
		if other.Cell != rec.Cell || other.EffectKey != rec.EffectKey || other.Final == nil || other.Handle == rec.Handle {
			continue
		}
		fmt.Fprintf(w, "  also on this business key: %s by %s operation_id %s (key holder %q)\n", other.Handle, other.Persona, other.OperationID, other.BusinessKeyHolder)
		for _, c := range ev.History.Calls {
			if c.Cell == rec.Cell && c.Handle == other.Handle {
				fmt.Fprintf(w, "    #%d %s %s %s operation_id=%s -> code=%s status=%s dedup=%v\n", c.Seq, c.Start.Format("15:04:05.000"), c.Persona, c.Tool, c.OperationID, c.Code, c.Status, c.Deduplicated)
			}
		}
		fmt.Fprintf(w, "    final: v%d %s %s resource=%s\n", other.Final.Version, other.Final.State, other.Final.Outcome, other.Final.ResourceID)
		for _, e := range other.Final.Journal {
			fmt.Fprintf(w, "      %s\n", journalLine(e))
		}
	}
}

// journalLine is one journal event for a report; times are the writer's
// clock (skewed under -skew), the commit deadline is the dispatcher's.
func journalLine(e operation.Event) string {
	line := fmt.Sprintf("%s %s %s->%s %s %s %s", e.At.Format("15:04:05.000"), e.Type, e.From, e.To, e.Result, e.ResourceID, e.Detail)
	if !e.CommitDeadline.IsZero() {
		line += " commit_deadline=" + e.CommitDeadline.UTC().Format("15:04:05.000")
	}
	return line
}

func argsName(args map[string]any, handle string) bool {
	if handle == "" {
		return false
	}
	for _, v := range args {
		if s, _ := v.(string); s == handle {
			return true
		}
	}
	return false
}
