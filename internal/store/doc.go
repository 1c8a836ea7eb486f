// Package store persists operations in one DynamoDB table. Every write that
// decides something is a conditional write: the insert is one
// TransactWriteItems over the operation item and its business-key item, and
// every transition is conditioned on the version and state it was computed
// from. There is no check-then-insert anywhere, so any number of replicas may
// race on the same key and exactly one wins.
//
// Items:
//
//	op#<handle>        the operation (state, version, journal, evidence)
//	bk#<tool>|<business key>  the claim on a business fact of one tool: operation_pk names the holder
//
// The sparse index "due" (gsi1pk = "due", gsi1sk = due time) holds only
// operations the reconciler must look at (PENDING leases, UNKNOWN,
// RETRYABLE); every transition sets or removes those two attributes in the
// same write that changes the state.
package store
