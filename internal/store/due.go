package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/operation"
)

// DueIndex is the sparse reconciliation index.
const DueIndex = "due"

// MaxDueLimit bounds one page of due work.
const MaxDueLimit = 100

// Shard counts of the due index. One index partition key value takes about
// 1,000 write units per second, so the entries are spread over N values
// derived from the handle (docs/capacity.md sizes N).
const (
	DefaultDueShards = 16
	MaxDueShards     = 256
)

// Partition key values of the due index. Shard 0 is "due" (the key of the
// unsharded index, so entries written before sharding are shard 0) and
// shard i > 0 is "due#i": the keys of a smaller shard count are a prefix of
// the keys of a larger one, so reading shards 0..M-1 finds every entry
// written under any count up to M.
const (
	dueShardPrefix = "due#"
	// parkedPrefix + tool: entries a reconciler without the tool's family
	// moved out of the shards, so they never block the sweep. Only a
	// reconciler that has the family reads them.
	parkedPrefix = "parked#"
)

func dueShardName(i int) string {
	if i == 0 {
		return dueShard
	}
	return dueShardPrefix + strconv.Itoa(i)
}

// DueShardOf is the shard a handle's entry is written to under a count of
// shards: every replica with the same count agrees.
func DueShardOf(handle string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(handle)) // a hash.Hash never fails to write
	return int(h.Sum32() % uint32(shards))
}

// dueKey is the index partition key this store writes for handle.
func (s *Store) dueKey(handle string) string {
	return dueShardName(DueShardOf(handle, s.cfg.DueShards))
}

// ParkedKey is the index partition key of the entries parked for tool.
func ParkedKey(tool string) string { return parkedPrefix + tool }

// validateDueShards fills and checks the shard settings of cfg.
func validateDueShards(cfg *Config) error {
	if cfg.DueShards == 0 {
		cfg.DueShards = DefaultDueShards
	}
	if cfg.DueShards < 1 || cfg.DueShards > MaxDueShards {
		return fmt.Errorf("store: due shards must be 1 to %d, got %d", MaxDueShards, cfg.DueShards)
	}
	if cfg.SweptDueShards == 0 {
		cfg.SweptDueShards = cfg.DueShards
	}
	if cfg.SweptDueShards < cfg.DueShards || cfg.SweptDueShards > MaxDueShards {
		return fmt.Errorf("store: swept due shards must be %d (the written count) to %d, got %d; it is the largest shard count any writer still uses",
			cfg.DueShards, MaxDueShards, cfg.SweptDueShards)
	}
	return nil
}

// DueShards is the number of shards this store writes to and the number
// its due reads cover (at least as many).
func (s *Store) DueShards() (written, swept int) { return s.cfg.DueShards, s.cfg.SweptDueShards }

// The shard counts writers have used, kept in one item (a number set): a
// deploy that raises the count and is rolled back, or one that lowers it,
// leaves entries in shards the new configuration does not reach, and
// nothing but a sweep moves a lost lease or an UNKNOWN in backoff. The item
// has no index attributes, so it is never in the due index or the stream
// filter's view.
const (
	shardCountsPK   = "meta#due_shard_counts"
	attrShardCounts = "counts"
)

// recordShardCount adds this store's shard count to the recorded counts,
// once per store, before its first write of a due entry. ADD to a number
// set is idempotent: a retry, or every other process writing with the same
// count, changes nothing.
func (s *Store) recordShardCount(ctx context.Context) error {
	if s.shardCountRecorded.Load() {
		return nil
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       pkKey(shardCountsPK),
		UpdateExpression:          aws.String("ADD #c :n"),
		ExpressionAttributeNames:  map[string]string{"#c": attrShardCounts},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(s.cfg.DueShards)}}},
	})
	if err != nil {
		return fmt.Errorf("record due shard count %d: %w", s.cfg.DueShards, err)
	}
	s.shardCountRecorded.Store(true)
	return nil
}

// SweptShards is how many shards a sweep reads: this store's swept count,
// or the largest count any writer recorded, whichever is larger. On an
// error it still answers the configured count, so a sweep can go on.
func (s *Store) SweptShards(ctx context.Context) (int, error) {
	n := s.cfg.SweptDueShards
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.cfg.Table),
		Key:                      pkKey(shardCountsPK),
		ProjectionExpression:     aws.String("#c"),
		ExpressionAttributeNames: map[string]string{"#c": attrShardCounts},
	})
	if err != nil {
		return n, fmt.Errorf("read due shard counts: %w", err)
	}
	if counts, ok := out.Item[attrShardCounts].(*types.AttributeValueMemberNS); ok {
		for _, v := range counts.Value {
			if c, err := strconv.Atoi(v); err == nil && c > n && c <= MaxDueShards {
				n = c
			}
		}
	}
	return n, nil
}

// DuePage is one page of operations the reconciler must look at.
type DuePage struct {
	Operations []operation.Operation
	// Cursor continues the query; empty when there is nothing more.
	Cursor string
	// ItemsRead is what the engine read for this page (ScannedCount): only
	// due items, since the index holds nothing else. An item read but left
	// for the next page (a later one from another shard came first) is
	// read again then.
	ItemsRead int
}

// Due reads the due index for operations due at or before now, oldest
// first across all swept shards, at most limit of them. Never a Scan:
// settled operations are not in the index at all. Sweeps use NewDueReader,
// which never reads an item twice.
func (s *Store) Due(ctx context.Context, now time.Time, limit int, cursor string) (DuePage, error) {
	if limit < 1 || limit > MaxDueLimit {
		return DuePage{}, fmt.Errorf("due: %w: limit must be 1 to %d", operation.ErrInvalid, MaxDueLimit)
	}
	r := s.NewDueReader(now, DueReaderOptions{PageLimit: limit})
	if cursor != "" {
		starts, err := decodeCursor(cursor, r.allowed())
		if err != nil {
			return DuePage{}, fmt.Errorf("due: %w", err)
		}
		r.restart(starts)
	}
	var page DuePage
	for len(page.Operations) < limit {
		op, ok, err := r.Next(ctx)
		if err != nil {
			return DuePage{}, err
		}
		if !ok {
			break
		}
		page.Operations = append(page.Operations, op)
	}
	page.ItemsRead = r.ItemsRead()
	c, err := encodeCursor(r.positions())
	if err != nil {
		return DuePage{}, fmt.Errorf("due: %w", err)
	}
	page.Cursor = c
	return page, nil
}

// DueReaderOptions configures a DueReader.
type DueReaderOptions struct {
	// PageLimit is the items one query of one shard reads (1 to
	// MaxDueLimit; default 25). Smaller pages leave fewer items read but
	// not taken when the reader is abandoned.
	PageLimit int
	// ParkedTools: also read the entries parked for these tools (the
	// families the caller can run).
	ParkedTools []string
	// Parallel bounds the queries in flight at once (default 4): enough to
	// hide DynamoDB's round trips, few enough that a single-threaded local
	// engine serves each query within its own budget.
	Parallel int
	// QueryContext, if set, derives each query's context (its store
	// budget, started when the query starts); default: the caller's.
	QueryContext func(context.Context) (context.Context, context.CancelFunc)
	// Shards is how many shards to read (SweptShards); never fewer than
	// the store's swept count.
	Shards int
}

// DueReader merges the due index's partitions (every swept shard and the
// parked entries of the caller's tools), each read in due order, into one
// stream with the oldest work first. The first pages of all partitions are
// read in parallel (Parallel at a time); afterwards a partition is read
// again only when its buffer is empty, so no item is read twice. Not safe
// for concurrent use.
type DueReader struct {
	st       *Store
	now      time.Time
	limit    int
	parallel int
	queryCtx func(context.Context) (context.Context, context.CancelFunc)
	parts    []*duePart
	read     int
}

type duePart struct {
	key string
	buf []dueEntry
	// start is the ExclusiveStartKey of the next query (nil: from the
	// beginning); last is the key of the last item taken from buf.
	start map[string]types.AttributeValue
	last  map[string]types.AttributeValue
	more  bool // the engine may hold more after start
	// lastScanned is the ScannedCount of the last query, collected by fill.
	lastScanned int
}

// NewDueReader reads what is due at or before now.
func (s *Store) NewDueReader(now time.Time, o DueReaderOptions) *DueReader {
	limit := o.PageLimit
	if limit < 1 || limit > MaxDueLimit {
		limit = 25
	}
	r := &DueReader{st: s, now: now, limit: limit, parallel: o.Parallel, queryCtx: o.QueryContext}
	if r.parallel < 1 {
		r.parallel = 4
	}
	if r.queryCtx == nil {
		r.queryCtx = func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }
	}
	for i := range min(max(o.Shards, s.cfg.SweptDueShards), MaxDueShards) {
		r.parts = append(r.parts, &duePart{key: dueShardName(i), more: true})
	}
	tools := slices.Clone(o.ParkedTools)
	slices.Sort(tools)
	for _, tool := range slices.Compact(tools) {
		r.parts = append(r.parts, &duePart{key: ParkedKey(tool), more: true})
	}
	return r
}

// Partitions is the number of index partition keys the reader merges.
func (r *DueReader) Partitions() int { return len(r.parts) }

// ItemsRead is what the engine has read so far (ScannedCount).
func (r *DueReader) ItemsRead() int { return r.read }

// Next returns the oldest due operation not yet returned; ok is false when
// nothing more is due.
func (r *DueReader) Next(ctx context.Context) (operation.Operation, bool, error) {
	var need []*duePart
	for _, p := range r.parts {
		if len(p.buf) == 0 && p.more {
			need = append(need, p)
		}
	}
	if err := r.fill(ctx, need); err != nil {
		return operation.Operation{}, false, err
	}
	var best *duePart
	for _, p := range r.parts {
		if len(p.buf) > 0 && (best == nil || p.buf[0].it.GSI1SK < best.buf[0].it.GSI1SK) {
			best = p
		}
	}
	if best == nil {
		return operation.Operation{}, false, nil
	}
	e := best.buf[0]
	best.buf = best.buf[1:]
	best.last = indexKey(e.it)
	if e.err != nil {
		return operation.Operation{}, false, &UndecodableItemError{PK: e.it.PK, Err: e.err}
	}
	op, err := fromItem(e.it)
	if err == nil && e.it.PK != opPK(op.Handle) {
		// Acted on, it would probe and write through another operation's
		// item (a hand edit): the stream entry point refuses it too.
		err = fmt.Errorf("item %s names handle %s, not its own", e.it.PK, op.Handle)
	}
	if err != nil {
		return operation.Operation{}, false, &UndecodableItemError{PK: e.it.PK, Err: err}
	}
	return op, true, nil
}

// dueEntry is one item of a page: decoded, or with the keys the index
// guarantees and why the rest could not be decoded, so the reader can
// report it and move past it (UndecodableItemError).
type dueEntry struct {
	it  opItem
	err error
}

// UndecodableItemError is a due item the store cannot read as an operation
// (a state a newer build wrote, a hand edit). The reader has moved past it:
// Next may be called again, so one such item never hides the rest.
type UndecodableItemError struct {
	PK  string
	Err error
}

func (e *UndecodableItemError) Error() string { return "due: item " + e.PK + ": " + e.Err.Error() }
func (e *UndecodableItemError) Unwrap() error { return e.Err }

// fill reads the next page of each part, in parallel, until each has an
// item or is known to be exhausted.
func (r *DueReader) fill(ctx context.Context, parts []*duePart) error {
	for len(parts) > 0 {
		errs := make([]error, len(parts))
		slots := make(chan struct{}, r.parallel)
		var wg sync.WaitGroup
		for i, p := range parts {
			wg.Go(func() {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					errs[i] = fmt.Errorf("due: query %s: %w", p.key, ctx.Err())
					return
				}
				defer func() { <-slots }()
				qctx, cancel := r.queryCtx(ctx)
				defer cancel()
				errs[i] = r.query(qctx, p)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		var again []*duePart
		for _, p := range parts {
			r.read += p.scanned()
			if len(p.buf) == 0 && p.more {
				again = append(again, p)
			}
		}
		parts = again
	}
	return nil
}

// query reads one page of p. It runs in parallel with other parts' queries
// and touches only p.
func (r *DueReader) query(ctx context.Context, p *duePart) error {
	due, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(attrGSI1PK).Equal(expression.Value(p.key)).
			And(expression.Key(attrGSI1SK).LessThanEqual(expression.Value(formatTime(r.now)))),
	).Build()
	if err != nil {
		return fmt.Errorf("due: key condition: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(r.st.cfg.Table),
		IndexName:                 aws.String(DueIndex),
		KeyConditionExpression:    due.KeyCondition(),
		ExpressionAttributeNames:  due.Names(),
		ExpressionAttributeValues: due.Values(),
		Limit:                     aws.Int32(int32(r.limit)),
		ExclusiveStartKey:         p.start,
	}
	out, err := r.st.db.Query(ctx, in)
	if err != nil {
		return fmt.Errorf("due: query %s: %w", p.key, err)
	}
	p.buf = p.buf[:0]
	for _, raw := range out.Items {
		var it opItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			// An attribute of the wrong type (a hand edit): the index keys
			// are strings by the table's definition, so the reader can
			// still order it and continue after it.
			p.buf = append(p.buf, dueEntry{it: opItem{PK: stringAttr(raw, attrPK), GSI1PK: stringAttr(raw, attrGSI1PK),
				GSI1SK: stringAttr(raw, attrGSI1SK)}, err: fmt.Errorf("decode: %w", err)})
			continue
		}
		p.buf = append(p.buf, dueEntry{it: it})
	}
	p.lastScanned = int(out.ScannedCount)
	p.start = out.LastEvaluatedKey
	p.more = len(out.LastEvaluatedKey) > 0
	return nil
}

func (p *duePart) scanned() int {
	n := p.lastScanned
	p.lastScanned = 0
	return n
}

// stringAttr is item[name] when it is a string, else "".
func stringAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// indexKey is the ExclusiveStartKey that continues a query after it.
func indexKey(it opItem) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:     &types.AttributeValueMemberS{Value: it.PK},
		attrGSI1PK: &types.AttributeValueMemberS{Value: it.GSI1PK},
		attrGSI1SK: &types.AttributeValueMemberS{Value: it.GSI1SK},
	}
}

// allowed is the set of partition keys this reader may be positioned in.
func (r *DueReader) allowed() map[string]bool {
	m := map[string]bool{}
	for _, p := range r.parts {
		m[p.key] = true
	}
	return m
}

// positions is where each partition with anything left continues: after
// the last item taken, or where the last query ended when all its items
// were taken. A partition absent is exhausted.
func (r *DueReader) positions() map[string]map[string]types.AttributeValue {
	pos := map[string]map[string]types.AttributeValue{}
	for _, p := range r.parts {
		switch {
		case len(p.buf) > 0:
			pos[p.key] = p.last // nil when nothing was taken yet
		case p.more:
			pos[p.key] = p.start
		}
	}
	return pos
}

// restart positions the reader where a cursor left off.
func (r *DueReader) restart(starts map[string]map[string]types.AttributeValue) {
	for _, p := range r.parts {
		start, ok := starts[p.key]
		p.start, p.last, p.more = start, start, ok
	}
}

// Park moves op's due entry out of the shards into the parked partition of
// its tool, for a reconciler that has no family for the tool: the entry
// must not block the sweep, and only a reconciler with the family reads it
// from there. Nothing else changes (its state, due_at and version stay), so
// the next transition of op writes it back into its shard. Conditioned on
// the version read: false when op has moved on meanwhile.
func (s *Store) Park(ctx context.Context, op operation.Operation) (bool, error) {
	if err := operation.ValidateHandle(op.Handle); err != nil {
		return false, fmt.Errorf("park: %w", err)
	}
	if op.Key.Tool == "" {
		return false, fmt.Errorf("park %s: %w: no tool", op.Handle, operation.ErrInvalid)
	}
	return s.updateDueEntry(ctx, op, "park", expression.Set(expression.Name(attrGSI1PK), expression.Value(ParkedKey(op.Key.Tool))))
}

// Postpone moves op's due time to until, in the operation and in its due
// index entry, and changes nothing else (no journal event, no version):
// for a search the provider never received, which spends nothing of the
// operation's budget but must not keep it at the head of the oldest-first
// sweep. Conditioned on the version read and on op still being in the
// index: false when it has moved on meanwhile.
func (s *Store) Postpone(ctx context.Context, op operation.Operation, until time.Time) (bool, error) {
	if err := operation.ValidateHandle(op.Handle); err != nil {
		return false, fmt.Errorf("postpone: %w", err)
	}
	at := formatTime(until)
	return s.updateDueEntry(ctx, op, "postpone", expression.Set(expression.Name("due_at"), expression.Value(at)).
		Set(expression.Name(attrGSI1SK), expression.Value(at)))
}

// updateDueEntry applies update to op's item if its version is the one read
// and it is in the due index.
func (s *Store) updateDueEntry(ctx context.Context, op operation.Operation, what string, update expression.UpdateBuilder) (bool, error) {
	cond := expression.Name(attrVersion).Equal(expression.Value(op.Version)).
		And(expression.AttributeExists(expression.Name(attrGSI1PK)))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return false, fmt.Errorf("%s %s: update expression: %w", what, op.Handle, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       pkKey(opPK(op.Handle)),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", what, op.Handle, err)
	}
	return true, nil
}

// The cursor maps each partition key still to read to the three string
// key attributes it continues after (none: from its beginning).
func encodeCursor(pos map[string]map[string]types.AttributeValue) (string, error) {
	if len(pos) == 0 {
		return "", nil
	}
	plain := map[string]map[string]string{}
	for part, key := range pos {
		plain[part] = map[string]string{}
		for k, v := range key {
			sv, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return "", fmt.Errorf("cursor attribute %s is not a string", k)
			}
			plain[part][k] = sv.Value
		}
	}
	b, err := json.Marshal(plain)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(c string, allowed map[string]bool) (map[string]map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed cursor", operation.ErrInvalid)
	}
	var plain map[string]map[string]string
	if err := json.Unmarshal(b, &plain); err != nil || len(plain) == 0 {
		return nil, fmt.Errorf("%w: malformed cursor", operation.ErrInvalid)
	}
	out := map[string]map[string]types.AttributeValue{}
	for part, key := range plain {
		if !allowed[part] {
			return nil, fmt.Errorf("%w: cursor names partition %q this reader does not read", operation.ErrInvalid, part)
		}
		if len(key) == 0 {
			out[part] = nil
			continue
		}
		start := map[string]types.AttributeValue{}
		for _, k := range []string{attrPK, attrGSI1PK, attrGSI1SK} {
			v, ok := key[k]
			if !ok {
				return nil, fmt.Errorf("%w: cursor lacks %s", operation.ErrInvalid, k)
			}
			start[k] = &types.AttributeValueMemberS{Value: v}
		}
		if start[attrGSI1PK].(*types.AttributeValueMemberS).Value != part || !strings.HasPrefix(key[attrPK], opPrefix) {
			return nil, fmt.Errorf("%w: cursor key does not belong to partition %q", operation.ErrInvalid, part)
		}
		out[part] = start
	}
	return out, nil
}
