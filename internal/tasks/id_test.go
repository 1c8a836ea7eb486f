package tasks_test

import (
	"strings"
	"testing"

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

func TestTaskIDNamesItsOperationOnEveryInstanceSharingTheKey(t *testing.T) {
	key, err := operation.NewRequestKey("client-a", "tenant-a", "alice", "create_deployment_ticket", "order-00001")
	require.NoError(t, err)
	id := testIDs(t, "k").For(key.Handle())
	handle, ok := testIDs(t, "k").Handle(id)
	require.True(t, ok)
	assert.Equal(t, key.Handle(), handle)
}

func TestTaskIDCannotBeDerivedFromAGuessableOperationID(t *testing.T) {
	key, err := operation.NewRequestKey("client-a", "tenant-a", "alice", "create_deployment_ticket", "order-00001")
	require.NoError(t, err)
	handle := key.Handle()
	// Someone who knows the handle but not the server key cannot forge the id.
	forged := "tsk_" + strings.TrimPrefix(handle, "op_") + "_" + strings.Repeat("a", 26)
	_, ok := testIDs(t, "k").Handle(forged)
	assert.False(t, ok)
	_, ok = testIDs(t, "other").Handle(testIDs(t, "k").For(handle))
	assert.False(t, ok, "an id minted under another key must not verify")
}

func TestMalformedTaskIDsAreUnknown(t *testing.T) {
	ids := testIDs(t, "k")
	for _, id := range []string{"", "tsk_", "op_abc", "tsk_abc_def", "tsk_" + strings.Repeat("a", 26), strings.Repeat("x", 5000)} {
		_, ok := ids.Handle(id)
		assert.False(t, ok, id)
	}
}

func TestShortTaskIDKeyIsRefused(t *testing.T) {
	_, err := tasks.NewIDs([]byte("short"))
	assert.Error(t, err)
}
