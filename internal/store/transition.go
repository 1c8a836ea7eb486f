package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/operation"
)

// Transition applies ev to the operation as read (current) in one
// conditional write: version = current.Version AND state = current.State.
// The same write bumps the version, appends the journal event and sets or
// removes the reconciliation index attributes. Entering FAILED (proven no
// effect) also deletes the business-key item in the same transaction, so a
// new attempt at the fact becomes possible, and gives the operation its TTL.
// A SUCCEEDED operation and its business key are kept: the fact they record
// stays true, and an expired claim would let the same fact be created again.
//
// An illegal event or a full journal is refused before any write. If the
// operation moved on meanwhile, nothing is written and a *StaleError carries
// the stored operation. If the "stale" item is our own write (the engine
// applied it, the answer was lost and the SDK retried), that is success.
func (s *Store) Transition(ctx context.Context, current operation.Operation, ev operation.Event) (operation.Operation, error) {
	if err := s.recordShardCount(ctx); err != nil {
		return operation.Operation{}, fmt.Errorf("transition %s: %w", current.Handle, err)
	}
	writeID, err := newNonce()
	if err != nil {
		return operation.Operation{}, err
	}
	ev.WriteID = writeID
	next, err := current.Apply(ev)
	if err != nil {
		return operation.Operation{}, fmt.Errorf("transition %s: %w", current.Handle, err)
	}
	newEvent := next.Journal[len(next.Journal)-1]
	update, err := s.operationUpdate(current, next, newEvent)
	if err != nil {
		return operation.Operation{}, fmt.Errorf("transition %s: %w", current.Handle, err)
	}

	// A write refused because another transaction holds the item applied
	// nothing and decided nothing: tried again, it lands, or meets the
	// other writer's version as stale.
	for attempt := 0; ; attempt++ {
		err = s.writeTransition(ctx, current, next, update)
		if !transactionConflict(err) {
			break
		}
		if attempt >= s.cfg.ConflictRetries {
			err = fmt.Errorf("%w: %w", ErrNotWritten, err)
			break
		}
		if werr := backoff(ctx, attempt); werr != nil {
			err = fmt.Errorf("%w: %w", ErrNotWritten, werr)
			break
		}
	}
	var stale *StaleError
	if errors.As(err, &stale) && stale.Current != nil && ownWrite(*stale.Current, next) {
		return next, nil
	}
	if err != nil {
		return operation.Operation{}, fmt.Errorf("transition %s %s->%s: %w", current.Handle, current.State, next.State, err)
	}
	return next, nil
}

// writeTransition writes next over current: one conditional update, or on
// entering FAILED the update and the business key's release in one
// transaction. Evidence journalled on an operation already FAILED releases
// nothing: its key went when it failed, and may be another's by now.
func (s *Store) writeTransition(ctx context.Context, current, next operation.Operation, update *types.Update) error {
	if next.State == operation.StateFailed && current.State != operation.StateFailed {
		withdrawal := next.Journal[len(next.Journal)-1].Type == operation.EventClientCancelled
		return s.transitionReleasingBusinessKey(ctx, current, update, withdrawal)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: update.Key,
		UpdateExpression: update.UpdateExpression, ConditionExpression: update.ConditionExpression,
		ExpressionAttributeNames: update.ExpressionAttributeNames, ExpressionAttributeValues: update.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return staleFrom(current.Handle, ccf.Item)
	}
	return err
}

// transactionConflict reports a write refused because another transaction
// held one of its items: TransactionConflictException for a single write, a
// cancellation naming TransactionConflict for a transaction.
func transactionConflict(err error) bool {
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return true
	}
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		for _, r := range cancelled.CancellationReasons {
			if code(r) == "TransactionConflict" {
				return true
			}
		}
	}
	return false
}

// ownWrite reports whether stored is exactly next: same version and, as
// its last journal event, the one this call wrote (its WriteID is unique).
func ownWrite(stored, next operation.Operation) bool {
	if stored.Version != next.Version || len(stored.Journal) == 0 || len(next.Journal) == 0 {
		return false
	}
	return stored.Journal[len(stored.Journal)-1].WriteID == next.Journal[len(next.Journal)-1].WriteID
}

// transitionReleasingBusinessKey records FAILED and deletes the business
// key in one transaction, so a proven no-effect never keeps blocking its
// fact. A client's withdrawal also needs no other key bound to the holder
// (shared_keys on the business key's item, which bind adds to under the
// condition that the item still names the holder): of a binding and a
// withdrawal written at once exactly one lands, and a refused withdrawal
// is ErrShared.
func (s *Store) transitionReleasingBusinessKey(ctx context.Context, current operation.Operation, update *types.Update, withdrawal bool) error {
	held := expression.Or(
		expression.AttributeNotExists(expression.Name(attrPK)),
		expression.Name(attrHolder).Equal(expression.Value(opPK(current.Handle))),
	)
	if withdrawal {
		held = held.And(expression.AttributeNotExists(expression.Name(attrSharedKeys)))
	}
	heldByCurrent, err := expression.NewBuilder().WithCondition(held).Build()
	if err != nil {
		return fmt.Errorf("business key condition: %w", err)
	}
	bkItem := types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(s.cfg.Table), Key: pkKey(bkPK(current.Key.Tool, current.BusinessKey)),
		ConditionExpression:                 heldByCurrent.Condition(),
		ExpressionAttributeNames:            heldByCurrent.Names(),
		ExpressionAttributeValues:           heldByCurrent.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Update: update}, bkItem},
	})
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) {
		return err
	}
	reasons := cancelled.CancellationReasons
	if len(reasons) == 2 && code(reasons[0]) == "ConditionalCheckFailed" {
		return staleFrom(current.Handle, reasons[0].Item)
	}
	if len(reasons) == 2 && code(reasons[1]) == "ConditionalCheckFailed" {
		if withdrawal && stringAttr(reasons[1].Item, attrHolder) == opPK(current.Handle) {
			return fmt.Errorf("withdrawal of %s: %w", current.Handle, ErrShared)
		}
		return fmt.Errorf("business key %q is not held by %s: %w", current.BusinessKey, current.Handle, ErrHolderMissing)
	}
	return err
}

// operationUpdate builds the conditional update of the operation item.
func (s *Store) operationUpdate(current, next operation.Operation, ev operation.Event) (*types.Update, error) {
	evJSON, err := encodeEvent(ev)
	if err != nil {
		return nil, err
	}
	journal := expression.Name(attrJournal)
	update := expression.Set(journal, expression.ListAppend(
		journal.IfNotExists(expression.Value(&types.AttributeValueMemberL{Value: []types.AttributeValue{}})),
		expression.Value(&types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: evJSON}}})))
	set := func(attr string, v any) { update = update.Set(expression.Name(attr), expression.Value(v)) }
	set(attrState, string(next.State))
	set(attrVersion, next.Version)
	set("outcome", string(next.Outcome))
	set("retry_count", next.RetryCount)
	set("probe_count", next.ProbeCount)
	set("client_timeouts", next.ClientTimeouts)
	set("duplicate_resources", next.DuplicateResources)
	set("updated_at", formatTime(next.UpdatedAt))
	for attr, v := range map[string]string{
		"resource_id": next.ResourceID, "receipt": next.Receipt, "escalation": next.Escalation,
		"due_at": formatTime(next.DueAt), "last_dispatch_at": formatTime(next.LastDispatchAt),
	} {
		if v == "" {
			update = update.Remove(expression.Name(attr))
			continue
		}
		set(attr, v)
	}
	if next.NeedsReconciliation() { // includes a SUCCEEDED operation whose duplicate audit is due
		set(attrGSI1PK, s.dueKey(next.Handle))
		set(attrGSI1SK, formatTime(next.DueAt))
	} else {
		update = update.Remove(expression.Name(attrGSI1PK)).Remove(expression.Name(attrGSI1SK))
	}
	if next.State == operation.StateFailed && !next.AwaitsOperator() && !next.WithdrawalAuditPending() {
		set(attrExpires, s.expiry(next))
	} else {
		// Kept: live work (a withdrawal's audit included), a fact that
		// stays true, or a FAILED operation an operator must close (an
		// effect reported after all, a withdrawal's audit that could not
		// finish), an incident whose record must outlive the retention.
		update = update.Remove(expression.Name(attrExpires))
	}
	condition := expression.Name(attrVersion).Equal(expression.Value(current.Version)).
		And(expression.Name(attrState).Equal(expression.Value(string(current.State))))
	if ev.Type == operation.EventRetryClaimed {
		// The claim rule (docs/design.md, State machine): only a due
		// RETRYABLE may be claimed.
		condition = condition.And(expression.Name("due_at").LessThanEqual(expression.Value(formatTime(ev.At))))
	}
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(condition).Build()
	if err != nil {
		return nil, fmt.Errorf("update expression: %w", err)
	}
	return &types.Update{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       pkKey(opPK(current.Handle)),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, nil
}

func (s *Store) expiry(op operation.Operation) int64 {
	return op.UpdatedAt.Add(s.cfg.Retention).Unix()
}

func staleFrom(handle string, item map[string]types.AttributeValue) error {
	se := &StaleError{Handle: handle}
	if len(item) == 0 {
		return se
	}
	var it opItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return errors.Join(se, fmt.Errorf("decode current item: %w", err))
	}
	if op, err := fromItem(it); err == nil {
		se.Current = &op
	}
	return se
}
