package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// PrintSummary writes the campaign's table: operations, faults injected by
// kind, final states and outcomes, escalations by reason, invariant
// violations, duration and operations per second.
func PrintSummary(w io.Writer, res Result) {
	ev := res.Evidence
	line := func(k string, v any) { fmt.Fprintf(w, "  %-44s %v\n", k, v) }
	fmt.Fprintf(w, "chaos campaign seed=%d\n", res.Seed)
	answered := 0
	for _, c := range ev.History.Calls {
		if c.Answered() {
			answered++
		}
	}
	stored := 0
	for _, r := range ev.Ops {
		if r.Final != nil {
			stored++
		}
	}
	fmt.Fprintln(w, "operations")
	line("planned operations", res.Ops)
	line("tool calls (answered)", fmt.Sprintf("%d (%d)", len(ev.History.Calls), answered))
	line("operations stored", stored)
	line("quiet-phase sweeps per cell", res.QuietSweeps)
	line("sweeps (overlapping another)", fmt.Sprintf("%d (%d)", res.Sweeps.Sweeps, res.Sweeps.Overlapped))
	line("sweeps' claims won / lost", fmt.Sprintf("%d / %d", res.Sweeps.ClaimsWon, res.Sweeps.ClaimsLost))
	line("stream entry point: batches (failed)", fmt.Sprintf("%d (%d)", res.Stream.Batches, res.Stream.FailedBatches))
	line("stream entry point: records (failed)", fmt.Sprintf("%d (%d)", res.Stream.Records, res.Stream.FailedRecords))
	for _, s := range res.Stream.Stopped {
		line("stream entry point stopped", s)
	}

	for _, k := range sortedKeys(res.Provider) {
		line(k, res.Provider[k])
	}
	fmt.Fprintln(w, "engine requests by sender and action (count, mean wall time, share of all engine wall time)")
	var engineTotal time.Duration
	for _, l := range res.Engine {
		engineTotal += l.Total
	}
	for _, k := range sortedKeys(res.Engine) {
		l := res.Engine[k]
		line(k, fmt.Sprintf("%d, %s, %.0f%%", l.Requests, (l.Total/time.Duration(l.Requests)).Round(time.Millisecond), 100*float64(l.Total)/float64(max(engineTotal, 1))))
	}
	fmt.Fprintln(w, "faults injected by kind")
	faults := map[string]int{}
	for _, f := range ev.History.Faults {
		faults[f.Kind]++
	}
	for _, k := range sortedKeys(faults) {
		line(k, faults[k])
	}
	if len(ev.History.Bursts) > 0 {
		// What invariant 7 judged of the admission gate.
		bySeq := map[int]Call{}
		for _, c := range ev.History.Calls {
			bySeq[c.Seq] = c
		}
		complete, peak, overloaded, calls := 0, 0, 0, 0
		for _, b := range ev.History.Bursts {
			if b.Complete {
				complete++
			}
			byProcess := map[string][]Hold{}
			for _, h := range b.Holds {
				if !h.To.IsZero() {
					byProcess[h.Process] = append(byProcess[h.Process], h)
				}
			}
			for _, hs := range byProcess {
				peak = max(peak, maxOverlap(hs))
			}
			for _, seq := range b.Calls {
				calls++
				if bySeq[seq].Code == "OVERLOADED" {
					overloaded++
				}
			}
		}
		fmt.Fprintln(w, "bursts at the admission gate")
		line("bursts (hold complete)", fmt.Sprintf("%d (%d)", len(ev.History.Bursts), complete))
		line("burst calls answered OVERLOADED", fmt.Sprintf("%d of %d", overloaded, calls))
		line("burst inserts held at once, most (slots)", fmt.Sprintf("%d (%d)", peak, ev.GateMaxInFlight))
	}
	codes := map[string]int{}
	for _, c := range ev.History.Calls {
		k := c.Code
		if !c.Answered() {
			k = "(no answer)"
		} else if k == "" {
			k = "(ok) " + c.Status
		}
		codes[c.Tool+" "+k]++
	}
	lat := map[string][]float64{}
	for _, c := range ev.History.Calls {
		lat[c.Tool] = append(lat[c.Tool], c.End.Sub(c.Start).Seconds())
	}
	fmt.Fprintln(w, "call latency by tool (p50 / p99 / max, seconds)")
	for _, k := range sortedKeys(lat) {
		v := lat[k]
		sort.Float64s(v)
		line(k, fmt.Sprintf("%.3f / %.3f / %.3f", v[len(v)/2], v[len(v)*99/100], v[len(v)-1]))
	}
	fmt.Fprintln(w, "answers by tool and code")
	for _, k := range sortedKeys(codes) {
		line(k, codes[k])
	}

	fmt.Fprintln(w, "final states and outcomes")
	states := map[string]int{}
	escalations := map[string]int{}
	for _, r := range ev.Ops {
		if r.Final == nil {
			continue
		}
		states[fmt.Sprintf("%s %s", r.Final.State, r.Final.Outcome)]++
		for _, e := range r.Final.Journal {
			if e.To == operation.StateEscalated && e.From != operation.StateEscalated {
				resolved := ""
				if r.Final.State != operation.StateEscalated {
					resolved = " (operator resolved " + string(r.Final.State) + ")"
				}
				escalations[string(e.Type)+resolved]++
			}
		}
	}
	for _, k := range sortedKeys(states) {
		line(k, states[k])
	}
	fmt.Fprintln(w, "escalations by reason")
	if len(escalations) == 0 {
		line("(none)", 0)
	}
	for _, k := range sortedKeys(escalations) {
		line(k, escalations[k])
	}
	fmt.Fprintln(w, "backpressure")
	for _, k := range sortedKeys(ev.MaxInFlight) {
		line("max downstream in flight "+k, fmt.Sprintf("%d (cap %d)", ev.MaxInFlight[k], ev.InFlightCap[k]))
	}
	fmt.Fprintln(w, "invariant violations (must be 0)")
	byInv := map[int]int{}
	for _, v := range res.Violations {
		byInv[v.Invariant]++
	}
	invs := make([]int, 0, len(InvariantNames))
	for k := range InvariantNames {
		invs = append(invs, k)
	}
	sort.Ints(invs)
	for _, k := range invs {
		line(fmt.Sprintf("%d %s", k, InvariantNames[k]), byInv[k])
	}
	line("total", len(res.Violations))
	secs := res.Duration.Seconds()
	line("duration", res.Duration.Round(1e6))
	if secs > 0 {
		line("operations per second", fmt.Sprintf("%.1f", float64(res.Ops)/secs))
	}
	fmt.Fprintln(w, strings.Repeat("-", 60))
}

// PrintViolations prints up to limit violations, each with its
// operation's history; the first printed is the first invariant broken.
func PrintViolations(w io.Writer, res Result, limit int) {
	for i, v := range res.Violations {
		if i == limit {
			fmt.Fprintf(w, "... %d more violations\n", len(res.Violations)-limit)
			return
		}
		PrintViolation(w, res.Evidence, v)
	}
}
