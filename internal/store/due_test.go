package store_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// replica is another store on the fixture's table with its own shard
// settings, as another process configured differently would be.
func (f fixture) replica(t *testing.T, written, swept int) *store.Store {
	t.Helper()
	st, err := store.New(f.db, store.Config{Table: f.table, DueShards: written, SweptDueShards: swept})
	require.NoError(t, err)
	return st
}

// unknownAt inserts an operation through st and makes it UNKNOWN, due at
// due.
func unknownAt(t *testing.T, st *store.Store, opID string, due time.Time) operation.Operation {
	t.Helper()
	op := newOp(t, "client-a", opID, "bk|"+opID, "r")
	res, err := st.InsertIfAbsent(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, store.Inserted, res.Kind)
	next, err := st.Transition(context.Background(), res.Operation, operation.Event{
		Type: operation.EventClientTimeout, At: t0.Add(time.Second), NextAt: due,
	})
	require.NoError(t, err)
	return next
}

func (f fixture) indexKey(t *testing.T, handle string) string {
	t.Helper()
	item := f.rawItem(t, "op#"+handle)
	if v, ok := item["gsi1pk"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// drain pages through Due with limit and returns the handles in order and
// the items read.
func drain(t *testing.T, st *store.Store, now time.Time, limit int) ([]string, int) {
	t.Helper()
	var got []string
	cursor, read := "", 0
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "paging must end")
		page, err := st.Due(context.Background(), now, limit, cursor)
		require.NoError(t, err)
		read += page.ItemsRead
		for _, op := range page.Operations {
			got = append(got, op.Handle)
		}
		if page.Cursor == "" {
			return got, read
		}
		cursor = page.Cursor
	}
}

func TestDueEntriesSpreadOverShardsDerivedFromTheHandle(t *testing.T) {
	f := newFixture(t)
	writer, other := f.replica(t, 8, 0), f.replica(t, 8, 0)
	seen := map[string]int{}
	for i := range 40 {
		op := unknownAt(t, writer, fmt.Sprintf("op-spread-%04d", i), t0.Add(time.Minute))
		want := "due"
		if s := store.DueShardOf(op.Handle, 8); s > 0 {
			want = fmt.Sprintf("due#%d", s)
		}
		assert.Equal(t, want, f.indexKey(t, op.Handle))
		seen[want]++
		if i%10 == 0 {
			// Another replica's transition keeps the entry in the same shard.
			_, err := other.Transition(context.Background(), op, operation.Event{
				Type: operation.EventProbeInconclusive, At: t0.Add(2 * time.Second), NextAt: t0.Add(2 * time.Minute),
				Outcome: operation.OutcomeProviderStatusUnavailable,
			})
			require.NoError(t, err)
			assert.Equal(t, want, f.indexKey(t, op.Handle), "every replica derives the same shard")
		}
	}
	assert.Len(t, seen, 8, "40 handles reach all 8 shards: %v", seen)
	for shard, n := range seen {
		assert.LessOrEqual(t, n, 12, "no shard takes a large share: %s has %d of 40", shard, n)
	}
}

func TestDueFindsEntriesWrittenUnderEveryShardCountInUse(t *testing.T) {
	f := newFixture(t)
	var want []operation.Operation
	for i, written := range []int{1, 4, 16, 2} { // 1: the unsharded index's key
		st := f.replica(t, written, 0)
		for j := range 4 {
			want = append(want, unknownAt(t, st, fmt.Sprintf("op-mixed-%d-%d", i, j), t0.Add(time.Duration(4*j+i)*time.Second)))
		}
	}
	f.insert(t, newOp(t, "client-a", "op-mixed-leased", "bk|leased", "r")) // PENDING until t0+30s: not due
	slices.SortFunc(want, func(a, b operation.Operation) int { return a.DueAt.Compare(b.DueAt) })
	var handles []string
	for _, op := range want {
		handles = append(handles, op.Handle)
	}

	sweeper := f.replica(t, 4, 16) // writes 4 shards now, still sweeps the 16 once in use
	got, read := drain(t, sweeper, t0.Add(20*time.Second), 3)
	assert.Equal(t, handles, got, "every entry, once, oldest first")
	assert.GreaterOrEqual(t, read, len(handles))

	r := sweeper.NewDueReader(t0.Add(20*time.Second), store.DueReaderOptions{PageLimit: 2})
	var streamed []string
	for {
		op, ok, err := r.Next(context.Background())
		require.NoError(t, err)
		if !ok {
			break
		}
		streamed = append(streamed, op.Handle)
	}
	assert.Equal(t, handles, streamed)
	assert.Equal(t, len(handles), r.ItemsRead(), "the reader never reads an item twice")
	assert.Equal(t, 16, r.Partitions())

	narrow := f.replica(t, 4, 0)
	got, _ = drain(t, narrow, t0.Add(20*time.Second), 10)
	assert.Less(t, len(got), len(handles), "a sweep covering fewer shards than a writer used misses entries: why the swept count exists")
}

func TestDueShardSettingsAreValidated(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ written, swept int }{{-1, 0}, {store.MaxDueShards + 1, 0}, {8, 4}, {8, store.MaxDueShards + 1}} {
		_, err := store.New(f.db, store.Config{Table: f.table, DueShards: c.written, SweptDueShards: c.swept})
		assert.Error(t, err, "written %d swept %d", c.written, c.swept)
	}
	written, swept := f.replica(t, 0, 0).DueShards()
	assert.Equal(t, store.DefaultDueShards, written)
	assert.Equal(t, store.DefaultDueShards, swept)
}

func TestDueCursorNamingAPartitionNotSweptIsRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []string{
		`{"parked#x":{}}`, // a tool's parked entries this reader was not asked for
		`{"due#99":{}}`,   // a shard beyond the swept count
		`{"due":{"pk":"op#x"}}`,
		`{"due":{"pk":"bk#x","gsi1pk":"due","gsi1sk":"a"}}`,   // not an operation
		`{"due":{"pk":"op#x","gsi1pk":"due#1","gsi1sk":"a"}}`, // another partition's key
		`{}`, `[]`, `null`,
	} {
		_, err := f.st.Due(context.Background(), t0, 10, base64.RawURLEncoding.EncodeToString([]byte(c)))
		require.ErrorIs(t, err, operation.ErrInvalid, c)
	}
	assert.Equal(t, 0, f.itemCount(t))
}

func TestParkMovesOnlyTheVersionReadAndKeepsItsDueTime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := unknownAt(t, f.st, "op-park-0001", t0.Add(time.Minute))
	before := f.rawItem(t, "op#"+op.Handle)

	parked, err := f.st.Park(ctx, op)
	require.NoError(t, err)
	assert.True(t, parked)
	after := f.rawItem(t, "op#"+op.Handle)
	assert.Equal(t, store.ParkedKey(op.Key.Tool), f.indexKey(t, op.Handle))
	for _, attr := range []string{"version", "state", "due_at", "gsi1sk", "journal"} {
		assert.Equal(t, before[attr], after[attr], attr)
	}
	page, err := f.st.Due(ctx, t0.Add(time.Hour), 10, "")
	require.NoError(t, err)
	assert.Empty(t, page.Operations, "out of the shards")
	r := f.st.NewDueReader(t0.Add(time.Hour), store.DueReaderOptions{ParkedTools: []string{op.Key.Tool}})
	got, ok, err := r.Next(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a reader with the tool finds it")
	assert.Equal(t, op.Handle, got.Handle)

	// Its next transition writes it back into its shard.
	next, err := f.st.Transition(ctx, op, operation.Event{
		Type: operation.EventProbeInconclusive, At: t0.Add(2 * time.Minute), NextAt: t0.Add(3 * time.Minute),
		Outcome: operation.OutcomeProviderStatusUnavailable,
	})
	require.NoError(t, err)
	assert.Contains(t, f.indexKey(t, op.Handle), "due")

	parked, err = f.st.Park(ctx, op)
	require.NoError(t, err)
	assert.False(t, parked, "a stale version is not parked")
	assert.Contains(t, f.indexKey(t, op.Handle), "due")

	settled, err := f.st.Transition(ctx, next, operation.Event{Type: operation.EventProbeFoundOne, At: t0.Add(4 * time.Minute), ResourceID: "rv-1"})
	require.NoError(t, err)
	parked, err = f.st.Park(ctx, settled)
	require.NoError(t, err)
	assert.False(t, parked, "a settled operation never re-enters the index")
	assert.Empty(t, f.indexKey(t, op.Handle))
}
