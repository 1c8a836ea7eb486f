package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/operation"
)

// A key answered by deduplication reads as its holder. The operator must
// act on the holder once, under the holder's handle: resolving it under
// the key's handle updated only the key's read, left the holder's read
// stale, and the checker saw the holder's version go back
// (SEED=10821006242837404072 OPS=6000 with withdrawals).
func TestTheOperatorActsOnEachOperationOnceUnderItsOwnHandle(t *testing.T) {
	incident := operation.Operation{Handle: "op_holder", State: operation.StateEscalated}
	reported := operation.Operation{Handle: "op_withdrawn", State: operation.StateFailed,
		Journal: []operation.Event{{Type: operation.EventEvidenceRecorded, From: operation.StateFailed, To: operation.StateFailed, ResourceID: "ticket-1"}}}
	reads := opReads{"op_holder": incident, "op_boundkey": incident, "op_withdrawn": reported, "op_boundtowithdrawn": reported}

	closings, incidents := reads.operatorWork()

	assert.Equal(t, []string{"op_withdrawn"}, closings)
	assert.Equal(t, []string{"op_holder"}, incidents)
}

// A holder the campaign knows only through a key bound to it is still
// acted on, under its own handle.
func TestTheOperatorReachesAHolderKnownOnlyThroughABoundKey(t *testing.T) {
	incident := operation.Operation{Handle: "op_holder", State: operation.StateEscalated}
	reads := opReads{"op_boundkey": incident}

	_, incidents := reads.operatorWork()

	assert.Equal(t, []string{"op_holder"}, incidents)
}

// After the operator, a bound key's read is its holder's final read.
func TestABoundKeyReadsAsItsHolderAfterTheOperator(t *testing.T) {
	before := operation.Operation{Handle: "op_holder", State: operation.StateEscalated, Version: 3}
	after := operation.Operation{Handle: "op_holder", State: operation.StateSucceeded, Version: 4}
	reads := opReads{"op_holder": after, "op_boundkey": before}

	assert.NoError(t, reads.followHolders(t.Context(), nil))

	assert.Equal(t, int64(4), reads["op_boundkey"].Version)
}
