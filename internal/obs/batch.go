package obs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// emfMaxValues is the most values one metric may carry in one EMF document.
const emfMaxValues = 100

// Batch collects the metrics of one invocation; Flush writes them.
type Batch struct {
	ms *Metrics

	mu      sync.Mutex
	order   []string          // dimension-set keys in first-seen order
	groups  map[string]*group // by dimension-set key
	flushed bool
}

// group is one document's worth: metrics sharing every dimension value.
type group struct {
	own     []string          // the metric's own dimension keys
	dims    map[string]string // base and own dimension values
	names   []string          // metric names in first-seen order
	units   map[string]string
	counts  map[string]float64   // Count metrics: summed
	values  map[string][]float64 // everything else: kept
	isCount map[string]bool
}

type batchKey struct{}

// StartBatch returns ctx in which every metric emitted through ms (or a
// copy of it) is collected instead of written: CloudWatch Logs then gets one
// EMF document per dimension combination with all its metrics, counts
// summed into one value and other values as an array, instead of one line
// per event. Call Flush when the invocation ends.
func (ms *Metrics) StartBatch(ctx context.Context) (context.Context, *Batch) {
	b := &Batch{ms: ms, groups: map[string]*group{}}
	return context.WithValue(ctx, batchKey{}, b), b
}

func batchFrom(ctx context.Context, ms *Metrics) *Batch {
	if ctx == nil {
		return nil
	}
	b, _ := ctx.Value(batchKey{}).(*Batch)
	if b == nil || b.ms.out != ms.out || b.ms.namespace != ms.namespace {
		return nil // another writer's batch: not ours to collect
	}
	return b
}

// add collects m; false when the batch was already flushed.
func (b *Batch) add(ms *Metrics, m Metric) bool {
	dims := make(map[string]string, len(ms.base)+len(m.Dimensions))
	maps.Copy(dims, ms.base)
	maps.Copy(dims, m.Dimensions)
	keys := slices.Sorted(maps.Keys(dims))
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(k + "\x00" + dims[k] + "\x00")
	}
	key := sb.String()

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flushed {
		return false
	}
	g := b.groups[key]
	if g == nil {
		g = &group{own: slices.Sorted(maps.Keys(m.Dimensions)), dims: dims, units: map[string]string{},
			counts: map[string]float64{}, values: map[string][]float64{}, isCount: map[string]bool{}}
		b.groups[key] = g
		b.order = append(b.order, key)
	}
	if _, seen := g.units[m.Name]; !seen {
		g.names = append(g.names, m.Name)
		g.units[m.Name] = m.Unit
		g.isCount[m.Name] = m.Unit == UnitCount
	}
	if g.isCount[m.Name] {
		g.counts[m.Name] += m.Value
	} else {
		g.values[m.Name] = append(g.values[m.Name], m.Value)
	}
	return true
}

// Flush writes the collected metrics, one document per dimension
// combination (more when a metric has over 100 values), and ends the batch:
// later metrics are written at once. Safe to call more than once.
func (b *Batch) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flushed {
		return nil
	}
	b.flushed = true
	var errs []error
	for _, key := range b.order {
		for _, line := range b.groups[key].documents(b.ms) {
			if err := b.ms.write(line); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// documents renders g, splitting value arrays at the EMF limit.
func (g *group) documents(ms *Metrics) [][]byte {
	aggregate := slices.Sorted(maps.Keys(ms.base))
	if aggregate == nil {
		aggregate = []string{}
	}
	sets := [][]string{aggregate}
	if len(g.own) > 0 {
		sets = [][]string{slices.Sorted(maps.Keys(g.dims)), aggregate}
	}
	var lines [][]byte
	for part := 0; ; part++ {
		doc := make(map[string]any, len(g.dims)+len(g.names)+1)
		var defs []emfMetricDefinition
		for _, name := range g.names {
			if g.isCount[name] {
				if part == 0 {
					doc[name] = g.counts[name]
					defs = append(defs, emfMetricDefinition{Name: name, Unit: g.units[name]})
				}
				continue
			}
			vs := g.values[name]
			lo := part * emfMaxValues
			if lo >= len(vs) {
				continue
			}
			chunk := vs[lo:min(lo+emfMaxValues, len(vs))]
			if len(chunk) == 1 {
				doc[name] = chunk[0]
			} else {
				doc[name] = chunk
			}
			defs = append(defs, emfMetricDefinition{Name: name, Unit: g.units[name]})
		}
		if len(defs) == 0 {
			return lines
		}
		for k, v := range g.dims {
			doc[k] = v
		}
		doc[emfMetadataKey] = emfMetadata{
			Timestamp:         ms.clock().UnixMilli(),
			CloudWatchMetrics: []emfDirective{{Namespace: ms.namespace, Dimensions: sets, Metrics: defs}},
		}
		line, err := json.Marshal(doc)
		if err != nil {
			// Values were validated finite on the way in; only a programming
			// error gets here. An error line stands in for the document.
			lines = append(lines, []byte(fmt.Sprintf(`{"level":"ERROR","msg":"obs: encode metric batch: %s"}`, err)))
			continue
		}
		lines = append(lines, line)
	}
}
