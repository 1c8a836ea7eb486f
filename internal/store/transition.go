package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
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

	switch next.State {
	case operation.StateFailed:
		err = s.transitionReleasingBusinessKey(ctx, current, update)
	default:
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.cfg.Table), Key: update.Key,
			UpdateExpression: update.UpdateExpression, ConditionExpression: update.ConditionExpression,
			ExpressionAttributeNames: update.ExpressionAttributeNames, ExpressionAttributeValues: update.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			err = staleFrom(current.Handle, ccf.Item)
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

// ownWrite reports whether stored is exactly next: same version and, as
// its last journal event, the one this call wrote (its WriteID is unique).
func ownWrite(stored, next operation.Operation) bool {
	if stored.Version != next.Version || len(stored.Journal) == 0 || len(next.Journal) == 0 {
		return false
	}
	return stored.Journal[len(stored.Journal)-1].WriteID == next.Journal[len(next.Journal)-1].WriteID
}

// transitionReleasingBusinessKey records FAILED and deletes the business
// key in one transaction, so a proven no-effect never keeps blocking its fact.
func (s *Store) transitionReleasingBusinessKey(ctx context.Context, current operation.Operation, update *types.Update) error {
	holder := &types.AttributeValueMemberS{Value: opPK(current.Handle)}
	bkItem := types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(s.cfg.Table), Key: pkKey(bkPK(current.BusinessKey)),
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR operation_pk = :holder"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":holder": holder},
	}}
	update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
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
	names := map[string]string{"#state": attrState, "#version": attrVersion, "#journal": attrJournal}
	values := map[string]types.AttributeValue{
		":from":  &types.AttributeValueMemberS{Value: string(current.State)},
		":v":     &types.AttributeValueMemberN{Value: strconv.FormatInt(current.Version, 10)},
		":ev":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: evJSON}}},
		":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
	}
	set := []string{"#journal = list_append(if_not_exists(#journal, :empty), :ev)"}
	var remove []string
	put := func(attr string, v any) error {
		av, err := attributevalue.Marshal(v)
		if err != nil {
			return fmt.Errorf("marshal %s: %w", attr, err)
		}
		n, p := "#"+attr, ":"+attr
		names[n], values[p] = attr, av
		set = append(set, n+" = "+p)
		return nil
	}
	drop := func(attr string) {
		names["#"+attr] = attr
		remove = append(remove, "#"+attr)
	}
	fields := []struct {
		attr string
		v    any
	}{
		{attrState, string(next.State)}, {attrVersion, next.Version}, {"outcome", string(next.Outcome)},
		{"retry_count", next.RetryCount}, {"probe_count", next.ProbeCount},
		{"client_timeouts", next.ClientTimeouts}, {"duplicate_resources", next.DuplicateResources},
		{"updated_at", formatTime(next.UpdatedAt)},
	}
	for _, f := range fields {
		if f.attr == attrState || f.attr == attrVersion {
			set = append(set, "#"+f.attr+" = :"+f.attr)
			av, err := attributevalue.Marshal(f.v)
			if err != nil {
				return nil, fmt.Errorf("marshal %s: %w", f.attr, err)
			}
			values[":"+f.attr] = av
			continue
		}
		if err := put(f.attr, f.v); err != nil {
			return nil, err
		}
	}
	for attr, v := range map[string]string{
		"resource_id": next.ResourceID, "receipt": next.Receipt, "escalation": next.Escalation,
		"due_at": formatTime(next.DueAt), "last_dispatch_at": formatTime(next.LastDispatchAt),
	} {
		if v == "" {
			drop(attr)
			continue
		}
		if err := put(attr, v); err != nil {
			return nil, err
		}
	}
	if next.NeedsReconciliation() { // includes a SUCCEEDED operation whose duplicate audit is due
		if err := put(attrGSI1PK, s.dueKey(next.Handle)); err != nil {
			return nil, err
		}
		if err := put(attrGSI1SK, formatTime(next.DueAt)); err != nil {
			return nil, err
		}
	} else {
		drop(attrGSI1PK)
		drop(attrGSI1SK)
	}
	if next.State == operation.StateFailed {
		if err := put(attrExpires, s.expiry(next)); err != nil {
			return nil, err
		}
	} else {
		drop(attrExpires)
	}
	condition := "#version = :v AND #state = :from"
	if ev.Type == operation.EventRetryClaimed {
		// The claim rule (docs/design.md, State machine): only a due
		// RETRYABLE may be claimed.
		names["#claim_due"] = "due_at"
		values[":claim_at"] = &types.AttributeValueMemberS{Value: formatTime(ev.At)}
		condition += " AND #claim_due <= :claim_at"
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	return &types.Update{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       pkKey(opPK(current.Handle)),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(condition),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
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
