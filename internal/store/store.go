package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/operation"
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
}

// Store is the DynamoDB adapter for operations.
type Store struct {
	db  *dynamodb.Client
	cfg Config
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
}

// InsertKind enumerates the insert outcomes.
type InsertKind int

// Insert outcomes. Only Inserted grants the right to dispatch.
const (
	Inserted        InsertKind = iota + 1
	Replay                     // same request key, same digest
	Conflict                   // same request key, different digest
	BusinessKeyHeld            // another live operation holds the business key
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
func (s *Store) InsertIfAbsent(ctx context.Context, op operation.Operation) (InsertResult, error) {
	if err := (operation.Intent{Key: op.Key, BusinessKey: op.BusinessKey, RequestDigest: op.RequestDigest, EndUserID: op.EndUserID, TenantID: op.TenantID}).Validate(); err != nil {
		return InsertResult{}, fmt.Errorf("insert: %w", err)
	}
	if op.State != operation.StatePending || op.Version != 1 || op.Handle != op.Key.Handle() {
		return InsertResult{}, fmt.Errorf("insert: %w: a new operation must be PENDING at version 1 with its derived handle", operation.ErrInvalid)
	}
	if len(op.Journal) > operation.MaxJournal {
		return InsertResult{}, fmt.Errorf("insert: %w", operation.ErrJournalFull)
	}
	nonce, err := newNonce()
	if err != nil {
		return InsertResult{}, err
	}
	it, err := toItem(op, nonce)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: %w", err)
	}
	opAV, err := attributevalue.MarshalMap(it)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: marshal operation: %w", err)
	}
	bkAV, err := attributevalue.MarshalMap(bkItem{PK: bkPK(op.BusinessKey), Kind: "business_key", Holder: it.PK, BusinessKey: op.BusinessKey, CreatedAt: it.CreatedAt})
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert: marshal business key: %w", err)
	}
	notExists := aws.String("attribute_not_exists(pk)")
	input := &dynamodb.TransactWriteItemsInput{
		// Derived from the scoped key and this attempt's nonce: the SDK's own
		// retries of this call are idempotent on DynamoDB, while another
		// replica's insert of the same key can never be taken for ours. The
		// store does not depend on it (moto ignores it): see ownInsert.
		ClientRequestToken: aws.String(requestToken(op.Key, nonce)),
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: opAV, ConditionExpression: notExists,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: bkAV, ConditionExpression: notExists,
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
			res, retry, derr := s.decodeInsertCancel(ctx, op, nonce, cancelled.CancellationReasons)
			if retry && attempt < s.cfg.ConflictRetries {
				if werr := backoff(ctx, attempt); werr != nil {
					return InsertResult{}, werr
				}
				continue
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
func (s *Store) decodeInsertCancel(ctx context.Context, op operation.Operation, nonce string, reasons []types.CancellationReason) (InsertResult, bool, error) {
	if len(reasons) != 2 {
		return InsertResult{}, false, fmt.Errorf("insert %s: engine returned %d cancellation reasons, want 2", op.Handle, len(reasons))
	}
	opReason, bkReason := reasons[0], reasons[1]
	if code(opReason) == "ConditionalCheckFailed" {
		var existing operation.Operation
		var existingNonce string
		if len(opReason.Item) > 0 {
			var it opItem
			if err := attributevalue.UnmarshalMap(opReason.Item, &it); err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: decode existing operation: %w", op.Handle, err)
			}
			got, err := fromItem(it)
			if err != nil {
				return InsertResult{}, false, err
			}
			existing, existingNonce = got, it.InsertNonce
		} else {
			got, itNonce, err := s.getWithNonce(ctx, op.Handle)
			if err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: read existing operation: %w", op.Handle, err)
			}
			existing, existingNonce = got, itNonce
		}
		return classifyExisting(op, existing, existingNonce, nonce), false, nil
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
			bk, err := s.getBusinessKey(ctx, op.BusinessKey)
			if err != nil {
				return InsertResult{}, false, fmt.Errorf("insert %s: read business key: %w", op.Handle, err)
			}
			holderPK = bk.Holder
		}
		holder, _, err := s.getWithNonce(ctx, holderPK[len(opPrefix):])
		if errors.Is(err, ErrNotFound) {
			return InsertResult{}, false, fmt.Errorf("insert %s: %w: %s", op.Handle, ErrHolderMissing, holderPK)
		}
		if err != nil {
			return InsertResult{}, false, fmt.Errorf("insert %s: read business key holder: %w", op.Handle, err)
		}
		return InsertResult{Kind: BusinessKeyHeld, Operation: holder}, false, nil
	}
	if code(opReason) == "TransactionConflict" || code(bkReason) == "TransactionConflict" {
		return InsertResult{}, true, fmt.Errorf("insert %s: transaction conflict persisted", op.Handle)
	}
	return InsertResult{}, false, fmt.Errorf("insert %s: cancelled: %s / %s", op.Handle, code(opReason), code(bkReason))
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

func (s *Store) resolveByRead(ctx context.Context, op operation.Operation, nonce string) (InsertResult, error) {
	existing, existingNonce, err := s.getWithNonce(ctx, op.Handle)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert %s: resolve by read: %w", op.Handle, err)
	}
	return classifyExisting(op, existing, existingNonce, nonce), nil
}

// Get reads an operation by handle with a consistent read.
func (s *Store) Get(ctx context.Context, handle string) (operation.Operation, error) {
	if err := operation.ValidateHandle(handle); err != nil {
		return operation.Operation{}, fmt.Errorf("get: %w", err)
	}
	op, _, err := s.getWithNonce(ctx, handle)
	return op, err
}

// GetByKey reads the operation stored under a scoped request key.
func (s *Store) GetByKey(ctx context.Context, key operation.RequestKey) (operation.Operation, error) {
	return s.Get(ctx, key.Handle())
}

func (s *Store) getWithNonce(ctx context.Context, handle string) (operation.Operation, string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            pkKey(opPK(handle)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return operation.Operation{}, "", fmt.Errorf("get %s: %w", handle, err)
	}
	if len(out.Item) == 0 {
		return operation.Operation{}, "", fmt.Errorf("get %s: %w", handle, ErrNotFound)
	}
	var it opItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return operation.Operation{}, "", fmt.Errorf("get %s: decode: %w", handle, err)
	}
	op, err := fromItem(it)
	return op, it.InsertNonce, err
}

func (s *Store) getBusinessKey(ctx context.Context, key string) (bkItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: pkKey(bkPK(key)), ConsistentRead: aws.Bool(true),
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
	t := time.NewTimer(time.Duration(10<<attempt) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("store backoff: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
