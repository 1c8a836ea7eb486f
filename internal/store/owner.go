package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/intentgate/intentgate/internal/operation"
)

// ownerProjection names the attributes GetOwner reads; the builder puts
// every name behind a placeholder (several are DynamoDB reserved words).
func ownerProjection() (expression.Expression, error) {
	return expression.NewBuilder().WithProjection(expression.NamesList(
		expression.Name("handle"), expression.Name("tool"), expression.Name("client_id"),
		expression.Name("end_user"), expression.Name("tenant"), expression.Name("target"),
		expression.Name("kind"), expression.Name(attrHolder), expression.Name("created_at"),
		expression.Name("holder_created_at"),
	)).Build()
}

// GetOwner reads only the owner attributes of the operation behind handle
// (a consistent, projected GetItem): enough to decide visibility without
// reading the journal, payload or outcome of an operation the caller may
// not see. ErrNotFound when there is none. A key first answered by
// deduplication holds a binding: its owner is the bound operation's, if
// that operation is still the one under the holder's handle (the same
// rule as followBinding).
func (s *Store) GetOwner(ctx context.Context, handle string) (operation.Owner, error) {
	it, binding, err := s.ownerItem(ctx, handle)
	if err != nil {
		return operation.Owner{}, err
	}
	if binding == nil {
		return ownerOf(it), nil
	}
	holder := strings.TrimPrefix(binding.Holder, opPrefix)
	if holder == handle || holder == "" {
		return operation.Owner{}, fmt.Errorf("get owner %s: binding names no other operation: %w", handle, ErrNotFound)
	}
	held, heldBinding, err := s.ownerItem(ctx, holder)
	if err != nil {
		return operation.Owner{}, err
	}
	if heldBinding != nil || held.CreatedAt != binding.HolderCreatedAt {
		return operation.Owner{}, fmt.Errorf("get owner %s: its holder %s is gone: %w", handle, holder, ErrNotFound)
	}
	return ownerOf(held), nil
}

// ownerItem is GetOwner's projected read of one item: an operation's owner
// attributes, or the binding stored there.
func (s *Store) ownerItem(ctx context.Context, handle string) (opItem, *bindingItem, error) {
	if err := operation.ValidateHandle(handle); err != nil {
		return opItem{}, nil, fmt.Errorf("get owner: %w", err)
	}
	projection, err := ownerProjection()
	if err != nil {
		return opItem{}, nil, fmt.Errorf("get owner %s: projection: %w", handle, err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.cfg.Table),
		Key:                      pkKey(opPK(handle)),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     projection.Projection(),
		ExpressionAttributeNames: projection.Names(),
	})
	if err != nil {
		return opItem{}, nil, fmt.Errorf("get owner %s: %w", handle, err)
	}
	if len(out.Item) == 0 {
		return opItem{}, nil, fmt.Errorf("get owner %s: %w", handle, ErrNotFound)
	}
	if isBinding(out.Item) {
		var b bindingItem
		if err := attributevalue.UnmarshalMap(out.Item, &b); err != nil {
			return opItem{}, nil, fmt.Errorf("get owner %s: decode binding: %w", handle, err)
		}
		return opItem{}, &b, nil
	}
	var it opItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return opItem{}, nil, fmt.Errorf("get owner %s: decode: %w", handle, err)
	}
	return it, nil, nil
}

func ownerOf(it opItem) operation.Owner {
	return operation.Owner{Handle: it.Handle, Tool: it.Tool, ClientID: it.ClientID,
		EndUserID: it.EndUserID, TenantID: it.TenantID, Target: it.Target}
}
