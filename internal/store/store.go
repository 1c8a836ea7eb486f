package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/pause"
)

// Config of the store. Defaults are filled by New.
type Config struct {
	Table string
	// Retention is how long a FAILED operation (proven no effect, business
	// key already released) is kept before DynamoDB's TTL removes it.
	// Default 90 days. Nothing else expires: a live or succeeded operation
	// and its business key record a fact that stays true.
	Retention time.Duration
	// ConflictRetries bounds retries of a transaction the engine cancelled
	// for a concurrent transaction on the same items (not a condition).
	ConflictRetries int
	// DueShards is how many due-index shards new entries are spread over
	// (default DefaultDueShards); SweptDueShards how many the due reads
	// cover: the largest count any writer still uses (default DueShards).
	DueShards, SweptDueShards int
}

// Store is the DynamoDB adapter for operations.
type Store struct {
	db  *dynamodb.Client
	cfg Config
	// shardCountRecorded: this store's shard count is in the table's
	// recorded counts (recordShardCount), so its due entries are swept.
	shardCountRecorded atomic.Bool
}

// New validates the configuration and returns a store.
func New(db *dynamodb.Client, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("store: nil dynamodb client")
	}
	if cfg.Table == "" {
		return nil, errors.New("store: table name is required")
	}
	if cfg.Retention == 0 {
		cfg.Retention = 90 * 24 * time.Hour
	}
	if cfg.Retention < time.Hour {
		return nil, fmt.Errorf("store: retention %s is below one hour", cfg.Retention)
	}
	if cfg.ConflictRetries == 0 {
		cfg.ConflictRetries = 3
	}
	if err := validateDueShards(&cfg); err != nil {
		return nil, err
	}
	return &Store{db: db, cfg: cfg}, nil
}

// Table is the table name.
func (s *Store) Table() string { return s.cfg.Table }

// InsertResult says what the insert found. Exactly one kind per call.
type InsertResult struct {
	Kind InsertKind
	// Operation is the stored operation: the new one (Inserted), the one
	// under this request key (Replay, Conflict) or the holder of the
	// business key (BusinessKeyHeld).
	Operation operation.Operation
	// Bound: this request key was first answered by deduplication and stays
	// bound to Operation, another key's operation. Replay and Conflict then
	// compare with the digest the key was first answered for.
	Bound bool
	// Unbound (BusinessKeyHeld only): the holder was one the caller may not
	// be answered with (BindOnlyTo), so the key was left free.
	Unbound bool
}

// InsertOption is an optional rule of one insert.
type InsertOption func(*insertOptions)

type insertOptions struct {
	bindable func(holder operation.Operation) bool
}

// BindOnlyTo binds the request key to the holder of its business key only
// where bindable says so. A caller that may not see the holder is refused,
// not answered with it, and a refused key stays free like any other
// refused call's: bound, it would be refused for as long as the binding
// lasts, even once the holder has failed and the fact is free again. The
// answer is then BusinessKeyHeld with Unbound set. Without it every holder
// is bound to.
func BindOnlyTo(bindable func(holder operation.Operation) bool) InsertOption {
	return func(o *insertOptions) { o.bindable = bindable }
}

// InsertKind enumerates the insert outcomes.
type InsertKind int

// Insert outcomes. Only Inserted grants the right to dispatch.
const (
	Inserted        InsertKind = iota + 1
	Replay                     // same request key, same digest (Bound: same answer as its first)
	Conflict                   // same request key, different digest
	BusinessKeyHeld            // another live operation holds the business key; this key is now bound to it
)

func (k InsertKind) String() string {
	switch k {
	case Inserted:
		return "inserted"
	case Replay:
		return "replay"
	case Conflict:
		return "conflict"
	case BusinessKeyHeld:
		return "business_key_held"
	}
	return "invalid"
}

// InsertIfAbsent stores a new operation and its business key in one
// TransactWriteItems, each conditioned on attribute_not_exists(pk). A
// cancelled transaction is decoded per item from the cancellation reasons;
// the engine's copy of the existing item is used, and only where it returned
// none is a consistent GetItem made. A conflict never dispatches anything:
// only Inserted grants the right to call the downstream.
//
// A key answered by deduplication is bound to the holder it was answered
// with (see bind), so its later use gives the same answer or a conflict,
// never a fresh operation, even once the holder has FAILED.
func (s *Store) InsertIfAbsent(ctx context.Context, op operation.Operation, opts ...InsertOption) (InsertResult, error) {
	var o insertOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := (operation.Intent{Key: op.Key, BusinessKey: op.BusinessKey, RequestDigest: op.RequestDigest, EndUserID: op.EndUserID, TenantID: op.TenantID}).Validate(); err != nil {
		return InsertResult{}, fmt.Errorf("insert: %w", err)
	}
	if op.State != operation.StatePending || op.Version != 1 || op.Handle != op.Key.Handle() {
		return InsertResult{}, fmt.Errorf("insert: %w: a new operation must be PENDING at version 1 with its derived handle", operation.ErrInvalid)
	}
	if len(op.Journal) > operation.MaxJournal {
		return InsertResult{}, fmt.Errorf("insert: %w", operation.ErrJournalFull)
	}
	if err := s.recordShardCount(ctx); err != nil {
		return InsertResult{}, fmt.Errorf("insert %s: %w: %w", op.Handle, ErrNotWritten, err)
	}
	nonce, err := newNonce()
	if err != nil {
		return InsertResult{}, err
	}
	it, err := toItem(op, nonce, s.dueKey(op.Handle))
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: %w", err)
	}
	opAV, err := attributevalue.MarshalMap(it)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: marshal operation: %w", err)
	}
	bkAV, err := attributevalue.MarshalMap(bkItem{PK: bkPK(op.Key.Tool, op.BusinessKey), Kind: "business_key", Holder: it.PK, BusinessKey: op.BusinessKey, CreatedAt: it.CreatedAt})
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: marshal business key: %w", err)
	}
	absent, err := keyAbsent()
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: %w", err)
	}
	input := &dynamodb.TransactWriteItemsInput{
		// Derived from the scoped key and this attempt's nonce: the SDK's own
		// retries of this call are idempotent on DynamoDB, while another
		// replica's insert of the same key can never be taken for ours. The
		// store does not depend on it (moto ignores it): see ownInsert.
		ClientRequestToken: aws.String(requestToken(op.Key, nonce)),
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: opAV,
				ConditionExpression: absent.Condition(), ExpressionAttributeNames: absent.Names(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: bkAV,
				ConditionExpression: absent.Condition(), ExpressionAttributeNames: absent.Names(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		},
	}
	for attempt := 0; ; attempt++ {
		_, err = s.db.TransactWriteItems(ctx, input)
		if err == nil {
			return InsertResult{Kind: Inserted, Operation: op}, nil
		}
		var cancelled *types.TransactionCanceledException
		var mismatch *types.IdempotentParameterMismatchException
		switch {
		case errors.As(err, &cancelled):
			res, retry, derr := s.decodeInsertCancel(ctx, op, nonce, cancelled.CancellationReasons, o)
			if retry && attempt < s.cfg.ConflictRetries {
				if werr := backoff(ctx, attempt); werr != nil {
					return InsertResult{}, fmt.Errorf("%w: %w", ErrNotWritten, werr)
				}
				continue
			}
			if retry {
				// Every attempt was cancelled whole, and a cancelled
				// transaction applies nothing.
				return InsertResult{}, fmt.Errorf("%w: %w", ErrNotWritten, derr)
			}
			return res, derr
		case errors.As(err, &mismatch):
			// Same token, other parameters: only possible if two attempts
			// shared a nonce; read what is there instead of guessing.
			return s.resolveByRead(ctx, op, nonce)
		default:
			return InsertResult{}, fmt.Errorf("insert %s: %w", op.Handle, err)
		}
	}
}

// decodeInsertCancel reads the per-item reasons: [operation, business key].
// retry is true when the cancellation says nothing final: a concurrent
// transaction, or a business key released by a FAILED holder meanwhile.
func (s *Store) decodeInsertCancel(ctx context.Context, op operation.Operation, nonce string, reasons []types.CancellationReason, o insertOptions) (res InsertResult, retry bool, err error) {
	if len(reasons) != 2 {
		return InsertResult{}, false, fmt.Errorf("insert %s: engine returned %d cancellation reasons, want 2", op.Handle, len(reasons))
	}
	opReason, bkReason := reasons[0], reasons[1]
	if code(opReason) == "ConditionalCheckFailed" {
		item := opReason.Item
		if len(item) == 0 {
			if item, err = s.getRaw(ctx, opPK(op.Handle)); err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: read existing operation: %w", op.Handle, err)
			}
		}
		res, err := s.classifyAt(ctx, op, nonce, item)
		return res, false, err
	}
	if code(bkReason) == "ConditionalCheckFailed" {
		holderPK := ""
		if len(bkReason.Item) > 0 {
			var bk bkItem
			if err := attributevalue.UnmarshalMap(bkReason.Item, &bk); err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: decode business key: %w", op.Handle, err)
			}
			holderPK = bk.Holder
		} else {
			bk, err := s.getBusinessKey(ctx, op.Key.Tool, op.BusinessKey)
			if err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: read business key: %w", op.Handle, err)
			}
			holderPK = bk.Holder
		}
		holder, _, err := s.getWithNonce(ctx, strings.TrimPrefix(holderPK, opPrefix))
		if errors.Is(err, ErrNotFound) {
			return InsertResult{}, false, fmt.Errorf("insert %s: %w: %s", op.Handle, ErrHolderMissing, holderPK)
		}
		if err != nil {
			return InsertResult{}, false, fmt.Errorf("insert %s: read business key holder: %w", op.Handle, err)
		}
		if holder.State == operation.StateFailed {
			// The holder failed, releasing the key, after the engine refused
			// ours: the fact is free again, so the insert is tried anew
			// rather than binding this key to a proven non-effect.
			return InsertResult{}, true, fmt.Errorf("insert %s: business key released by a failed holder meanwhile", op.Handle)
		}
		if o.bindable != nil && !o.bindable(holder) {
			return InsertResult{Kind: BusinessKeyHeld, Operation: holder, Unbound: true}, false, nil
		}
		return s.bind(ctx, op, holder, nonce)
	}
	if code(opReason) == "TransactionConflict" || code(bkReason) == "TransactionConflict" {
		return InsertResult{}, true, fmt.Errorf("insert %s: transaction conflict persisted", op.Handle)
	}
	return InsertResult{}, false, fmt.Errorf("insert %s: cancelled: %s / %s", op.Handle, code(opReason), code(bkReason))
}

// bind records that op's request key was answered with holder: a binding
// item at the key's own pk, conditioned on attribute_not_exists(pk) like an
// insert, and in the same transaction one more shared key on the business
// key's item, conditioned on that item still naming this holder (created
// at the same instant). A FAILED holder has released its business key, so
// a binding and a withdrawal of the holder written at once exclude each
// other (the withdrawal's release needs no shared keys), and no key is
// bound to a holder that failed since it was read: retry is then true, and
// the insert is tried anew on a fact that may be free. The count is kept
// on the business key's item, which only inserts of the same fact and the
// release write, so bindings never contend with the holder's own writes
// (its dispatcher, a reconciler). Two
// keys deduplicated onto one holder at once write two items; two calls
// with one key race on one item, and the loser is classified against the
// winner's digest. A binding whose write applied but whose answer was lost
// carries our nonce, so the SDK's retry is recognised.
func (s *Store) bind(ctx context.Context, op, holder operation.Operation, nonce string) (res InsertResult, retry bool, err error) {
	av, err := attributevalue.MarshalMap(bindingItem{
		PK: opPK(op.Handle), Kind: kindBinding, Handle: op.Handle,
		ClientID: op.Key.ClientID, TenantID: op.Key.TenantID, Tool: op.Key.Tool, OperationID: op.Key.OperationID,
		RequestDigest: op.RequestDigest, EndUserID: op.EndUserID, Holder: opPK(holder.Handle),
		HolderCreatedAt: formatTime(holder.CreatedAt), CreatedAt: formatTime(op.CreatedAt), InsertNonce: nonce,
	})
	if err != nil {
		return InsertResult{}, false, fmt.Errorf("insert %s: marshal binding: %w", op.Handle, err)
	}
	absent, err := keyAbsent()
	if err != nil {
		return InsertResult{}, false, fmt.Errorf("insert %s: bind: %w", op.Handle, err)
	}
	stillHeld, err := expression.NewBuilder().
		WithUpdate(expression.Add(expression.Name(attrSharedKeys), expression.Value(1))).
		WithCondition(expression.Name(attrHolder).Equal(expression.Value(opPK(holder.Handle))).
			And(expression.Name(attrCreatedAt).Equal(expression.Value(formatTime(holder.CreatedAt))))).
		Build()
	if err != nil {
		return InsertResult{}, false, fmt.Errorf("insert %s: bind: %w", op.Handle, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: av,
				ConditionExpression: absent.Condition(), ExpressionAttributeNames: absent.Names(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Update: &types.Update{TableName: aws.String(s.cfg.Table), Key: pkKey(bkPK(holder.Key.Tool, holder.BusinessKey)),
				UpdateExpression: stillHeld.Update(), ConditionExpression: stillHeld.Condition(),
				ExpressionAttributeNames: stillHeld.Names(), ExpressionAttributeValues: stillHeld.Values()}},
		},
	})
	if err == nil {
		return InsertResult{Kind: BusinessKeyHeld, Operation: holder}, false, nil
	}
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) {
		return InsertResult{}, false, fmt.Errorf("insert %s: bind to %s: %w", op.Handle, holder.Handle, err)
	}
	reasons := cancelled.CancellationReasons
	if len(reasons) != 2 {
		return InsertResult{}, false, fmt.Errorf("insert %s: bind: engine returned %d cancellation reasons, want 2", op.Handle, len(reasons))
	}
	switch {
	case code(reasons[0]) == "ConditionalCheckFailed":
		item := reasons[0].Item
		if len(item) == 0 {
			if item, err = s.getRaw(ctx, opPK(op.Handle)); err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: read existing binding: %w", op.Handle, err)
			}
		}
		res, err := s.classifyAt(ctx, op, nonce, item)
		return res, false, err
	case code(reasons[1]) == "ConditionalCheckFailed":
		return InsertResult{}, true, fmt.Errorf("insert %s: business key no longer held by %s (it failed meanwhile)", op.Handle, holder.Handle)
	case code(reasons[0]) == "TransactionConflict" || code(reasons[1]) == "TransactionConflict":
		return InsertResult{}, true, fmt.Errorf("insert %s: bind: transaction conflict persisted", op.Handle)
	}
	return InsertResult{}, false, fmt.Errorf("insert %s: bind cancelled: %s / %s", op.Handle, code(reasons[0]), code(reasons[1]))
}

// classifyAt decides what the item already stored under op's request key
// means for op: an operation (ours, a replay or a conflict) or a binding to
// another operation (ours, a replay of the deduplicated answer, or a
// conflict with the digest the key was first answered for).
func (s *Store) classifyAt(ctx context.Context, op operation.Operation, nonce string, item map[string]types.AttributeValue) (InsertResult, error) {
	if !isBinding(item) {
		var it opItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return InsertResult{}, fmt.Errorf("insert %s: decode existing operation: %w", op.Handle, err)
		}
		existing, err := fromItem(it)
		if err != nil {
			return InsertResult{}, err
		}
		return classifyExisting(op, existing, it.InsertNonce, nonce), nil
	}
	var b bindingItem
	if err := attributevalue.UnmarshalMap(item, &b); err != nil {
		return InsertResult{}, fmt.Errorf("insert %s: decode binding: %w", op.Handle, err)
	}
	holder, err := s.followBinding(ctx, b)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert %s: %w", op.Handle, err)
	}
	switch {
	case b.InsertNonce == nonce:
		return InsertResult{Kind: BusinessKeyHeld, Operation: holder}, nil
	case b.RequestDigest == op.RequestDigest:
		return InsertResult{Kind: Replay, Operation: holder, Bound: true}, nil
	default:
		return InsertResult{Kind: Conflict, Operation: holder, Bound: true}, nil
	}
}

// followBinding reads the operation a binding names. A holder removed by
// retention (a FAILED operation's TTL) is ErrHolderMissing, and so is
// another operation recorded under its handle since (its operation_id
// reused after the retention): the key was answered with the holder, not
// with whatever takes its handle later.
func (s *Store) followBinding(ctx context.Context, b bindingItem) (operation.Operation, error) {
	holder, _, err := s.getWithNonce(ctx, strings.TrimPrefix(b.Holder, opPrefix))
	if errors.Is(err, ErrNotFound) {
		return operation.Operation{}, fmt.Errorf("binding %s: %w: %s", b.Handle, ErrHolderMissing, b.Holder)
	}
	if err != nil {
		return operation.Operation{}, fmt.Errorf("binding %s: read holder: %w", b.Handle, err)
	}
	if formatTime(holder.CreatedAt) != b.HolderCreatedAt {
		return operation.Operation{}, fmt.Errorf("binding %s: %w: %s now holds an operation created at %s, not the one of %s",
			b.Handle, ErrHolderMissing, b.Holder, formatTime(holder.CreatedAt), b.HolderCreatedAt)
	}
	return holder, nil
}

func isBinding(item map[string]types.AttributeValue) bool {
	return stringAttr(item, "kind") == kindBinding
}

// classifyExisting decides between our own earlier write (an SDK retry of
// an applied transaction on an engine that ignores ClientRequestToken),
// a replay and a conflict.
func classifyExisting(op, existing operation.Operation, existingNonce, nonce string) InsertResult {
	switch {
	case existingNonce == nonce:
		return InsertResult{Kind: Inserted, Operation: existing}
	case existing.RequestDigest == op.RequestDigest:
		return InsertResult{Kind: Replay, Operation: existing}
	default:
		return InsertResult{Kind: Conflict, Operation: existing}
	}
}

// Recorded answers, without writing anything, what the table already holds
// for a request with key and digest: a Replay (the same digest, stored
// under the key or answered through its binding) or a Conflict. A key
// never used is ErrNotFound. It lets a replay be answered from the record
// when a check that gates only new writes (authorization) cannot be
// passed now: the operation exists whatever that check would say today.
func (s *Store) Recorded(ctx context.Context, key operation.RequestKey, digest string) (InsertResult, error) {
	handle := key.Handle()
	item, err := s.getRaw(ctx, opPK(handle))
	if err != nil {
		return InsertResult{}, fmt.Errorf("recorded %s: %w", handle, err)
	}
	if !isBinding(item) {
		existing, _, err := decodeOperation(handle, item)
		if err != nil {
			return InsertResult{}, err
		}
		if existing.RequestDigest == digest {
			return InsertResult{Kind: Replay, Operation: existing}, nil
		}
		return InsertResult{Kind: Conflict, Operation: existing}, nil
	}
	var b bindingItem
	if err := attributevalue.UnmarshalMap(item, &b); err != nil {
		return InsertResult{}, fmt.Errorf("recorded %s: decode binding: %w", handle, err)
	}
	holder, err := s.followBinding(ctx, b)
	if err != nil {
		return InsertResult{}, fmt.Errorf("recorded %s: %w", handle, err)
	}
	if b.RequestDigest == digest {
		return InsertResult{Kind: Replay, Operation: holder, Bound: true}, nil
	}
	return InsertResult{Kind: Conflict, Operation: holder, Bound: true}, nil
}

func (s *Store) resolveByRead(ctx context.Context, op operation.Operation, nonce string) (InsertResult, error) {
	item, err := s.getRaw(ctx, opPK(op.Handle))
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert %s: resolve by read: %w", op.Handle, err)
	}
	return s.classifyAt(ctx, op, nonce, item)
}

// Get reads an operation by handle with a consistent read.
func (s *Store) Get(ctx context.Context, handle string) (operation.Operation, error) {
	if err := operation.ValidateHandle(handle); err != nil {
		return operation.Operation{}, fmt.Errorf("get: %w", err)
	}
	item, err := s.getRaw(ctx, opPK(handle))
	if err != nil {
		return operation.Operation{}, err
	}
	if isBinding(item) {
		// A key first answered by deduplication: its operation is the one
		// it was answered with.
		var b bindingItem
		if err := attributevalue.UnmarshalMap(item, &b); err != nil {
			return operation.Operation{}, fmt.Errorf("get %s: decode binding: %w", handle, err)
		}
		return s.followBinding(ctx, b)
	}
	op, _, err := decodeOperation(handle, item)
	return op, err
}

// GetByKey reads the operation stored under a scoped request key, or the
// one the key is bound to.
func (s *Store) GetByKey(ctx context.Context, key operation.RequestKey) (operation.Operation, error) {
	return s.Get(ctx, key.Handle())
}

// getWithNonce reads an operation item; a binding there is an error (callers
// use it where only an operation can be: a business key's holder).
func (s *Store) getWithNonce(ctx context.Context, handle string) (operation.Operation, string, error) {
	item, err := s.getRaw(ctx, opPK(handle))
	if err != nil {
		return operation.Operation{}, "", err
	}
	if isBinding(item) {
		return operation.Operation{}, "", fmt.Errorf("get %s: a binding, not an operation", handle)
	}
	return decodeOperation(handle, item)
}

// getRaw is a consistent GetItem of one item by pk.
func (s *Store) getRaw(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            pkKey(pk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("get %s: %w", pk, ErrNotFound)
	}
	return out.Item, nil
}

func decodeOperation(handle string, item map[string]types.AttributeValue) (operation.Operation, string, error) {
	var it opItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return operation.Operation{}, "", fmt.Errorf("get %s: decode: %w", handle, err)
	}
	op, err := fromItem(it)
	return op, it.InsertNonce, err
}

// BusinessKeyHolder is the handle of the operation that holds a tool's
// business key (a consistent read), or ErrNotFound when none does: the
// fact is free. For checks of the table from outside (the fault campaign);
// the write path never reads before it writes.
func (s *Store) BusinessKeyHolder(ctx context.Context, tool, key string) (string, error) {
	bk, err := s.getBusinessKey(ctx, tool, key)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(bk.Holder, opPrefix), nil
}

func (s *Store) getBusinessKey(ctx context.Context, tool, key string) (bkItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: pkKey(bkPK(tool, key)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return bkItem{}, fmt.Errorf("get business key: %w", err)
	}
	if len(out.Item) == 0 {
		return bkItem{}, fmt.Errorf("get business key %q: %w", key, ErrNotFound)
	}
	var bk bkItem
	if err := attributevalue.UnmarshalMap(out.Item, &bk); err != nil {
		return bkItem{}, fmt.Errorf("decode business key: %w", err)
	}
	return bk, nil
}

// keyAbsent is the condition of every put that creates an item: nothing
// stored at its pk yet.
func keyAbsent() (expression.Expression, error) {
	absent, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrPK))).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("condition expression: %w", err)
	}
	return absent, nil
}

func pkKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: pk}}
}

func code(r types.CancellationReason) string { return aws.ToString(r.Code) }

func newNonce() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("insert nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func backoff(ctx context.Context, attempt int) error {
	if err := pause.Sleep(ctx, time.Duration(10<<attempt)*time.Millisecond); err != nil {
		return fmt.Errorf("store backoff: %w", err)
	}
	return nil
}
