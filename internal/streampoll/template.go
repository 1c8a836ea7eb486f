package streampoll

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Trigger is how a SAM template wires a function to a DynamoDB stream and a
// schedule: the event source mapping's settings and the schedule's rate.
type Trigger struct {
	BatchSize         int
	MaxBatchingWindow time.Duration
	StartingPosition  string   // LATEST or TRIM_HORIZON
	FilterPatterns    []string // FilterCriteria.Filters[].Pattern, ORed
	MaxRetryAttempts  int      // -1: until the record expires
	MaxRecordAge      time.Duration
	// ReportBatchItemFailures: FunctionResponseTypes lists it, so Lambda
	// reads the handler's batchItemFailures; without it, it ignores them.
	ReportBatchItemFailures bool
	// FunctionTimeout bounds one invocation (the function's Timeout).
	FunctionTimeout time.Duration
	// SweepEvery is the rate of the function's Schedule event; 0 if none.
	SweepEvery time.Duration
}

// Lambda's documented defaults for a DynamoDB event source mapping, used
// where the template leaves a setting out.
const (
	defaultBatchSize        = 100
	defaultFunctionTimeout  = 3 * time.Second
	maxBatchSize            = 10000
	maxBatchingWindow       = 300 * time.Second
	defaultMaxRetryAttempts = -1
)

// TriggerFromTemplate reads function's DynamoDB and Schedule events from the
// SAM template at path. Intrinsic functions (!GetAtt, !Ref) in settings the
// poller does not need are ignored; a setting it needs must be a literal.
func TriggerFromTemplate(path, function string) (Trigger, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Trigger{}, fmt.Errorf("read template: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return Trigger{}, fmt.Errorf("parse template %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return Trigger{}, fmt.Errorf("template %s is empty", path)
	}
	root := doc.Content[0]
	fn := child(child(root, "Resources"), function)
	if fn == nil {
		return Trigger{}, fmt.Errorf("template %s: no resource %s", path, function)
	}
	props := child(fn, "Properties")
	tr := Trigger{BatchSize: defaultBatchSize, StartingPosition: "LATEST", MaxRetryAttempts: defaultMaxRetryAttempts, FunctionTimeout: defaultFunctionTimeout}
	if v := child(child(child(root, "Globals"), "Function"), "Timeout"); v != nil {
		if tr.FunctionTimeout, err = seconds(v, "Globals.Function.Timeout"); err != nil {
			return Trigger{}, err
		}
	}
	if v := child(props, "Timeout"); v != nil {
		if tr.FunctionTimeout, err = seconds(v, function+".Timeout"); err != nil {
			return Trigger{}, err
		}
	}
	events := child(props, "Events")
	if events == nil || events.Kind != yaml.MappingNode {
		return Trigger{}, fmt.Errorf("template %s: %s has no Events", path, function)
	}
	var streams, schedules int
	for i := 0; i+1 < len(events.Content); i += 2 {
		name, ev := events.Content[i].Value, events.Content[i+1]
		evProps := child(ev, "Properties")
		switch scalar(child(ev, "Type")) {
		case "DynamoDB":
			streams++
			if err := tr.readStream(evProps, function+".Events."+name); err != nil {
				return Trigger{}, fmt.Errorf("template %s: %w", path, err)
			}
		case "Schedule":
			schedules++
			if tr.SweepEvery, err = parseRate(scalar(child(evProps, "Schedule"))); err != nil {
				return Trigger{}, fmt.Errorf("template %s: %s.Events.%s: %w", path, function, name, err)
			}
		}
	}
	if streams != 1 || schedules > 1 {
		return Trigger{}, fmt.Errorf("template %s: %s has %d DynamoDB and %d Schedule events; want one and at most one", path, function, streams, schedules)
	}
	return tr, nil
}

func (tr *Trigger) readStream(props *yaml.Node, where string) error {
	var err error
	if v := child(props, "BatchSize"); v != nil {
		if tr.BatchSize, err = integer(v, where+".BatchSize"); err != nil {
			return err
		}
		if tr.BatchSize < 1 || tr.BatchSize > maxBatchSize {
			return fmt.Errorf("%s.BatchSize %d: want 1..%d", where, tr.BatchSize, maxBatchSize)
		}
	}
	if v := child(props, "MaximumBatchingWindowInSeconds"); v != nil {
		if tr.MaxBatchingWindow, err = seconds(v, where+".MaximumBatchingWindowInSeconds"); err != nil {
			return err
		}
		if tr.MaxBatchingWindow < 0 || tr.MaxBatchingWindow > maxBatchingWindow {
			return fmt.Errorf("%s.MaximumBatchingWindowInSeconds: want 0..300", where)
		}
	}
	if v := child(props, "StartingPosition"); v != nil {
		tr.StartingPosition = scalar(v)
		if tr.StartingPosition != "LATEST" && tr.StartingPosition != "TRIM_HORIZON" {
			return fmt.Errorf("%s.StartingPosition %q: want LATEST or TRIM_HORIZON", where, tr.StartingPosition)
		}
	}
	if v := child(props, "MaximumRetryAttempts"); v != nil {
		if tr.MaxRetryAttempts, err = integer(v, where+".MaximumRetryAttempts"); err != nil {
			return err
		}
		if tr.MaxRetryAttempts < -1 {
			return fmt.Errorf("%s.MaximumRetryAttempts %d: want -1 or more", where, tr.MaxRetryAttempts)
		}
	}
	if v := child(props, "MaximumRecordAgeInSeconds"); v != nil {
		n, err := integer(v, where+".MaximumRecordAgeInSeconds")
		if err != nil {
			return err
		}
		if n > 0 { // -1: no limit
			tr.MaxRecordAge = time.Duration(n) * time.Second
		}
	}
	if v := child(props, "FunctionResponseTypes"); v != nil {
		if v.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s.FunctionResponseTypes is not a literal list", where)
		}
		for i, t := range v.Content {
			// The only response type Lambda defines; anything else is a typo
			// that would silently turn partial batch responses off.
			if t.Kind != yaml.ScalarNode || t.Value != "ReportBatchItemFailures" {
				return fmt.Errorf("%s.FunctionResponseTypes[%d] %q: want ReportBatchItemFailures", where, i, t.Value)
			}
			tr.ReportBatchItemFailures = true
		}
	}
	filters := child(child(props, "FilterCriteria"), "Filters")
	if filters != nil {
		if filters.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s.FilterCriteria.Filters is not a list", where)
		}
		for i, f := range filters.Content {
			p := child(f, "Pattern")
			if p == nil || p.Kind != yaml.ScalarNode || p.Tag == "!Sub" {
				return fmt.Errorf("%s.FilterCriteria.Filters[%d].Pattern is not a literal string", where, i)
			}
			tr.FilterPatterns = append(tr.FilterPatterns, p.Value)
		}
	}
	return nil
}

// parseRate reads an EventBridge rate expression: rate(N minute|minutes|hour|hours|day|days).
func parseRate(expr string) (time.Duration, error) {
	inner, ok := strings.CutPrefix(expr, "rate(")
	inner, ok2 := strings.CutSuffix(inner, ")")
	if !ok || !ok2 {
		return 0, fmt.Errorf("schedule %q: only rate(...) expressions are supported", expr)
	}
	num, unit, ok := strings.Cut(strings.TrimSpace(inner), " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 {
		return 0, fmt.Errorf("schedule %q: want rate(<positive integer> <unit>)", expr)
	}
	units := map[string]time.Duration{
		"minute": time.Minute, "minutes": time.Minute,
		"hour": time.Hour, "hours": time.Hour,
		"day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	u, ok := units[strings.TrimSpace(unit)]
	if !ok {
		return 0, fmt.Errorf("schedule %q: unit %q is not minute(s), hour(s) or day(s)", expr, unit)
	}
	if (n == 1) != !strings.HasSuffix(unit, "s") {
		return 0, fmt.Errorf("schedule %q: EventBridge wants %q singular only for 1", expr, unit)
	}
	return time.Duration(n) * u, nil
}

// child is the value of key in mapping node m, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

var errNotLiteral = errors.New("not a literal number")

func integer(n *yaml.Node, where string) (int, error) {
	if n.Kind != yaml.ScalarNode || (strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")) {
		return 0, fmt.Errorf("%s: %w", where, errNotLiteral)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", where, err)
	}
	return v, nil
}

func seconds(n *yaml.Node, where string) (time.Duration, error) {
	v, err := integer(n, where)
	return time.Duration(v) * time.Second, err
}
