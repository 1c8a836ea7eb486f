package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/operation"
)

// DueIndex is the sparse reconciliation index.
const DueIndex = "due"

// MaxDueLimit bounds one page of due work.
const MaxDueLimit = 100

// DuePage is one page of operations the reconciler must look at.
type DuePage struct {
	Operations []operation.Operation
	// Cursor continues the query; empty when there is nothing more.
	Cursor string
	// ItemsRead is what the engine read for this page (ScannedCount): only
	// due items, since the index holds nothing else.
	ItemsRead int
}

// Due queries the sparse index for operations due at or before now, oldest
// first. Never a Scan: settled operations are not in the index at all.
func (s *Store) Due(ctx context.Context, now time.Time, limit int, cursor string) (DuePage, error) {
	if limit < 1 || limit > MaxDueLimit {
		return DuePage{}, fmt.Errorf("due: %w: limit must be 1 to %d", operation.ErrInvalid, MaxDueLimit)
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		IndexName:              aws.String(DueIndex),
		KeyConditionExpression: aws.String("gsi1pk = :due AND gsi1sk <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":due": &types.AttributeValueMemberS{Value: dueShard},
			":now": &types.AttributeValueMemberS{Value: formatTime(now)},
		},
		Limit: aws.Int32(int32(limit)),
	}
	if cursor != "" {
		start, err := decodeCursor(cursor)
		if err != nil {
			return DuePage{}, fmt.Errorf("due: %w", err)
		}
		in.ExclusiveStartKey = start
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return DuePage{}, fmt.Errorf("due: query: %w", err)
	}
	page := DuePage{ItemsRead: int(out.ScannedCount)}
	for _, raw := range out.Items {
		var it opItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			return DuePage{}, fmt.Errorf("due: decode: %w", err)
		}
		op, err := fromItem(it)
		if err != nil {
			return DuePage{}, fmt.Errorf("due: %w", err)
		}
		page.Operations = append(page.Operations, op)
	}
	if len(out.LastEvaluatedKey) > 0 {
		if page.Cursor, err = encodeCursor(out.LastEvaluatedKey); err != nil {
			return DuePage{}, fmt.Errorf("due: %w", err)
		}
	}
	return page, nil
}

// The cursor carries only the three string key attributes of the index.
func encodeCursor(key map[string]types.AttributeValue) (string, error) {
	plain := map[string]string{}
	for k, v := range key {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return "", fmt.Errorf("cursor attribute %s is not a string", k)
		}
		plain[k] = sv.Value
	}
	b, err := json.Marshal(plain)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(c string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed cursor", operation.ErrInvalid)
	}
	var plain map[string]string
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, fmt.Errorf("%w: malformed cursor", operation.ErrInvalid)
	}
	out := map[string]types.AttributeValue{}
	for _, k := range []string{attrPK, attrGSI1PK, attrGSI1SK} {
		v, ok := plain[k]
		if !ok {
			return nil, fmt.Errorf("%w: cursor lacks %s", operation.ErrInvalid, k)
		}
		out[k] = &types.AttributeValueMemberS{Value: v}
	}
	return out, nil
}
