package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
)

func testIDs(t *testing.T, seed string) tasks.IDs {
	t.Helper()
	ids, err := tasks.NewIDs([]byte(strings.Repeat(seed, 32)[:32]))
	require.NoError(t, err)
	return ids
}

// created is a creation time with nanoseconds, as the store keeps it.
var created = time.Date(2026, 7, 28, 10, 31, 8, 123456789, time.UTC)

// opAt is an operation under handle created at at.
func opAt(handle string, at time.Time) operation.Operation {
	return operation.Operation{Handle: handle, CreatedAt: at}
}

func TestTaskIDNamesItsOperationOnEveryInstanceSharingTheKey(t *testing.T) {
	key, err := operation.NewRequestKey("client-a", "tenant-a", "alice", "create_deployment_ticket", "order-00001")
	require.NoError(t, err)
	id := testIDs(t, "k").For(key.Handle(), created)
	assert.Regexp(t, `^tsk_[a-z2-7]{26}_[a-z2-7]{13}_[a-z2-7]{26}$`, id, "bounded length, strict alphabet")
	ref, ok := testIDs(t, "k").Parse(id)
	require.True(t, ok)
	assert.Equal(t, key.Handle(), ref.Handle)
	assert.True(t, ref.Names(opAt(key.Handle(), created)))
}

// A handle outlives its operation: a FAILED operation expires after the
// retention, and the same operation_id then records a new operation under
// the same handle. The task id carries its operation's creation time, so
// it names that operation and no later one.
func TestTaskIDNamesOneOperationNotEveryOperationUnderItsHandle(t *testing.T) {
	key, err := operation.NewRequestKey("client-a", "tenant-a", "alice", "create_deployment_ticket", "order-00001")
	require.NoError(t, err)
	ids := testIDs(t, "k")
	first := ids.For(key.Handle(), created)
	later := created.Add(time.Hour)
	second := ids.For(key.Handle(), later)
	assert.NotEqual(t, first, second, "two operations, two task ids")

	ref, ok := ids.Parse(first)
	require.True(t, ok)
	assert.False(t, ref.Names(opAt(key.Handle(), later)), "the expired task does not name the next operation")
	assert.False(t, ref.Names(opAt(key.Handle(), created.Add(time.Nanosecond))))

	// An id minted for no operation (an insert whose outcome is unknown)
	// verifies and names none.
	ref, ok = ids.Parse(ids.For(key.Handle(), time.Time{}))
	require.True(t, ok)
	assert.False(t, ref.Names(opAt(key.Handle(), created)))
}

func TestTaskIDCannotBeDerivedFromAGuessableOperationID(t *testing.T) {
	key, err := operation.NewRequestKey("client-a", "tenant-a", "alice", "create_deployment_ticket", "order-00001")
	require.NoError(t, err)
	handle := key.Handle()
	ids := testIDs(t, "k")
	genuine := ids.For(handle, created)
	body, stamp := strings.Split(genuine, "_")[1], strings.Split(genuine, "_")[2]
	// Someone who knows the handle and the creation time but not the
	// server key cannot forge the id.
	_, ok := ids.Parse("tsk_" + body + "_" + stamp + "_" + strings.Repeat("a", 26))
	assert.False(t, ok)
	_, ok = testIDs(t, "other").Parse(genuine)
	assert.False(t, ok, "an id minted under another key must not verify")
	// Nor move a genuine MAC to another creation time.
	other := strings.Split(ids.For(handle, created.Add(time.Second)), "_")[2]
	_, ok = ids.Parse("tsk_" + body + "_" + other + "_" + strings.Split(genuine, "_")[3])
	assert.False(t, ok)
}

// Ids of the earlier form (handle and MAC, no creation time) are no longer
// accepted: they named a handle, not an operation.
func TestMalformedTaskIDsAreUnknown(t *testing.T) {
	ids := testIDs(t, "k")
	genuine := ids.For("op_"+strings.Repeat("a", 26), created)
	for _, id := range []string{"", "tsk_", "op_abc", "tsk_abc_def", "tsk_" + strings.Repeat("a", 26),
		"tsk_" + strings.Repeat("a", 26) + "_" + strings.Repeat("b", 26), // the earlier form
		strings.ToUpper(genuine), genuine + "a", genuine[:len(genuine)-1], strings.Replace(genuine, "_", "-", 1),
		strings.Repeat("x", 5000)} {
		_, ok := ids.Parse(id)
		assert.False(t, ok, id)
	}
}

func TestShortTaskIDKeyIsRefused(t *testing.T) {
	_, err := tasks.NewIDs([]byte("short"))
	assert.Error(t, err)
}

// A rotation without a window would turn every outstanding task into
// "Task not found" the moment an instance starts with the new key. The
// key setting carries the previous key behind the new one: ids minted
// under either verify, new ids are minted under the first.
func TestATaskIDMintedUnderThePreviousKeyStillVerifiesDuringARotation(t *testing.T) {
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	before, err := tasks.NewIDs(oldKey)
	require.NoError(t, err)
	rotated, err := tasks.NewIDs(newKey, oldKey)
	require.NoError(t, err)
	handle := "op_" + strings.Repeat("a", 26)

	outstanding := before.For(handle, created)
	ref, ok := rotated.Parse(outstanding)
	require.True(t, ok, "an id minted before the rotation verifies after it")
	assert.True(t, ref.Names(opAt(handle, created)))

	minted := rotated.For(handle, created)
	assert.NotEqual(t, outstanding, minted, "new ids are minted under the first key")
	newOnly, err := tasks.NewIDs(newKey)
	require.NoError(t, err)
	_, ok = newOnly.Parse(minted)
	assert.True(t, ok, "and verify once the previous key is retired")
	_, ok = newOnly.Parse(outstanding)
	assert.False(t, ok, "an id minted under a retired key is unknown")
}

// The first step of a rotation puts the new key behind the one in use, so
// an instance still holding only the old key verifies everything minted
// meanwhile; only then does the new key move to the front.
func TestTheFirstStepOfARotationMintsUnderTheKeyInUse(t *testing.T) {
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	notYet, err := tasks.NewIDs(oldKey)
	require.NoError(t, err)
	stepOne, err := tasks.NewIDs(oldKey, newKey)
	require.NoError(t, err)
	stepTwo, err := tasks.NewIDs(newKey, oldKey)
	require.NoError(t, err)
	handle := "op_" + strings.Repeat("b", 26)

	_, ok := notYet.Parse(stepOne.For(handle, created))
	assert.True(t, ok, "an instance not yet restarted verifies what the first step mints")
	_, ok = stepOne.Parse(stepTwo.For(handle, created))
	assert.True(t, ok, "an instance still at the first step verifies what the second mints")
}

func TestTaskIDKeySettingCarriesOneKeyOrSeveralSeparatedByWhiteSpace(t *testing.T) {
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 40)
	keys, err := tasks.Keys(a)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte(a)}, keys)
	keys, err = tasks.Keys(" " + a + "\n" + b + "\n")
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte(a), []byte(b)}, keys, "in order: the first mints")

	for name, setting := range map[string]string{
		"empty":               "  \n",
		"a short key":         a + " short",
		"the same key twice":  a + " " + a,
		"more than four keys": strings.Join([]string{a, b, a + "1", b + "2", a + "3"}, " "),
	} {
		_, err := tasks.Keys(setting)
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "aaaa", "%s: the error must not carry a key", name)
	}
}

func TestTaskIDsWithoutAKeyAreRefused(t *testing.T) {
	_, err := tasks.NewIDs()
	assert.Error(t, err)
	_, err = tasks.NewIDs([]byte(strings.Repeat("k", 32)), []byte("short"))
	assert.Error(t, err, "a short previous key too")
}
