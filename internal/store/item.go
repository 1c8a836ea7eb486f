package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

const (
	opPrefix = "op#"
	bkPrefix = "bk#"
	// dueShard is shard 0 of the due index (due.go).
	dueShard = "due"
	// timeLayout is fixed-width UTC so index sort keys order by time.
	timeLayout = "2006-01-02T15:04:05.000000000Z"
)

// Attribute names shared by the schema, the items and the expressions.
const (
	attrPK      = "pk"
	attrGSI1PK  = "gsi1pk"
	attrGSI1SK  = "gsi1sk"
	attrExpires = "expires_at"
	attrState   = "state"
	attrVersion = "version"
	attrJournal = "journal"
	attrHolder  = "operation_pk"
	// attrSharedKeys, on a business key's item, counts the request keys
	// bound to its holder (store.bind).
	attrSharedKeys = "shared_keys"
	attrCreatedAt  = "created_at"
)

func opPK(handle string) string { return opPrefix + handle }

// bkPK is a business key's item, scoped by the tool whose operations it
// holds: a business key names a fact of one kind of write, and two tools
// whose families happened to derive the same text (a void and a refund of
// one charge) are two facts. A tool name has no '|' (operation's tool
// alphabet), so the tool and the key cannot be re-split.
func bkPK(tool, key string) string { return bkPrefix + tool + "|" + key }

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeLayout, s)
}

// opItem is the DynamoDB shape of an operation.
type opItem struct {
	PK                 string            `dynamodbav:"pk"`
	Kind               string            `dynamodbav:"kind"`
	Handle             string            `dynamodbav:"handle"`
	ClientID           string            `dynamodbav:"client_id"`
	Tool               string            `dynamodbav:"tool"`
	OperationID        string            `dynamodbav:"operation_id"`
	BusinessKey        string            `dynamodbav:"business_key"`
	RequestDigest      string            `dynamodbav:"request_digest"`
	EndUserID          string            `dynamodbav:"end_user"`
	TenantID           string            `dynamodbav:"tenant,omitempty"`
	Target             map[string]string `dynamodbav:"target,omitempty"`
	Payload            map[string]string `dynamodbav:"payload,omitempty"`
	State              string            `dynamodbav:"state"`
	Outcome            string            `dynamodbav:"outcome"`
	Version            int64             `dynamodbav:"version"`
	RetryCount         int               `dynamodbav:"retry_count"`
	ProbeCount         int               `dynamodbav:"probe_count"`
	ClientTimeouts     int               `dynamodbav:"client_timeouts"`
	ResourceID         string            `dynamodbav:"resource_id,omitempty"`
	Receipt            string            `dynamodbav:"receipt,omitempty"`
	DuplicateResources int               `dynamodbav:"duplicate_resources"`
	Escalation         string            `dynamodbav:"escalation,omitempty"`
	DueAt              string            `dynamodbav:"due_at,omitempty"`
	LastDispatchAt     string            `dynamodbav:"last_dispatch_at,omitempty"`
	CreatedAt          string            `dynamodbav:"created_at"`
	UpdatedAt          string            `dynamodbav:"updated_at"`
	Journal            []string          `dynamodbav:"journal"`
	InsertNonce        string            `dynamodbav:"insert_nonce"`
	GSI1PK             string            `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK             string            `dynamodbav:"gsi1sk,omitempty"`
	ExpiresAt          int64             `dynamodbav:"expires_at,omitempty"`
}

// bkItem is the claim on a business fact.
type bkItem struct {
	PK          string `dynamodbav:"pk"`
	Kind        string `dynamodbav:"kind"`
	Holder      string `dynamodbav:"operation_pk"`
	BusinessKey string `dynamodbav:"business_key"`
	CreatedAt   string `dynamodbav:"created_at"` // the holder's
	// SharedKeys counts the other request keys bound to the holder: each
	// of those calls waits on it too, so its owner may not withdraw it. It
	// lives here, not on the operation, so bindings never contend with
	// the holder's own writes (dispatcher, reconciler).
	SharedKeys int `dynamodbav:"shared_keys,omitempty"`
}

// kindBinding marks a bindingItem; operation items are "operation".
const kindBinding = "binding"

// bindingItem records that a request key was answered with another
// operation (the live holder of its business key): it sits where that key's
// own operation would (op#<handle of the key>), so the insert's
// attribute_not_exists(pk) meets it like an operation, and it keeps the
// digest the key was first answered for.
type bindingItem struct {
	PK            string `dynamodbav:"pk"`
	Kind          string `dynamodbav:"kind"`
	Handle        string `dynamodbav:"handle"`
	ClientID      string `dynamodbav:"client_id"`
	TenantID      string `dynamodbav:"tenant,omitempty"`
	Tool          string `dynamodbav:"tool"`
	OperationID   string `dynamodbav:"operation_id"`
	RequestDigest string `dynamodbav:"request_digest"`
	EndUserID     string `dynamodbav:"end_user"`
	Holder        string `dynamodbav:"operation_pk"`
	// HolderCreatedAt names which operation under Holder's handle the key
	// was answered with: a handle outlives its operation (a FAILED one
	// expires after the retention, and its operation_id may then record
	// another), and the key must never be answered with the next one.
	HolderCreatedAt string `dynamodbav:"holder_created_at"`
	CreatedAt       string `dynamodbav:"created_at"`
	InsertNonce     string `dynamodbav:"insert_nonce"`
}

func encodeEvent(ev operation.Event) (string, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("encode journal event %s: %w", ev.Type, err)
	}
	return string(b), nil
}

// toItem is op's item; dueKey is the index partition its entry goes to
// while it needs reconciliation.
func toItem(op operation.Operation, nonce, dueKey string) (opItem, error) {
	it := opItem{
		PK: opPK(op.Handle), Kind: "operation", Handle: op.Handle,
		ClientID: op.Key.ClientID, Tool: op.Key.Tool, OperationID: op.Key.OperationID,
		BusinessKey: op.BusinessKey, RequestDigest: op.RequestDigest,
		EndUserID: op.EndUserID, TenantID: op.TenantID, Target: op.Target, Payload: op.Payload,
		State: string(op.State), Outcome: string(op.Outcome), Version: op.Version,
		RetryCount: op.RetryCount, ProbeCount: op.ProbeCount,
		ClientTimeouts: op.ClientTimeouts, ResourceID: op.ResourceID, Receipt: op.Receipt,
		DuplicateResources: op.DuplicateResources, Escalation: op.Escalation,
		DueAt: formatTime(op.DueAt), LastDispatchAt: formatTime(op.LastDispatchAt),
		CreatedAt: formatTime(op.CreatedAt), UpdatedAt: formatTime(op.UpdatedAt),
		InsertNonce: nonce, Journal: make([]string, 0, len(op.Journal)),
	}
	for _, ev := range op.Journal {
		s, err := encodeEvent(ev)
		if err != nil {
			return opItem{}, err
		}
		it.Journal = append(it.Journal, s)
	}
	if op.NeedsReconciliation() { // includes a SUCCEEDED operation whose duplicate audit is due
		it.GSI1PK, it.GSI1SK = dueKey, formatTime(op.DueAt)
	}
	return it, nil
}

func fromItem(it opItem) (operation.Operation, error) {
	op := operation.Operation{
		Handle:      it.Handle,
		Key:         operation.RequestKey{ClientID: it.ClientID, TenantID: it.TenantID, Subject: it.EndUserID, Tool: it.Tool, OperationID: it.OperationID},
		BusinessKey: it.BusinessKey, RequestDigest: it.RequestDigest,
		EndUserID: it.EndUserID, TenantID: it.TenantID, Target: it.Target, Payload: it.Payload,
		State: operation.State(it.State), Outcome: operation.Outcome(it.Outcome), Version: it.Version,
		RetryCount: it.RetryCount, ProbeCount: it.ProbeCount,
		ClientTimeouts: it.ClientTimeouts, ResourceID: it.ResourceID, Receipt: it.Receipt,
		DuplicateResources: it.DuplicateResources, Escalation: it.Escalation,
	}
	if !op.State.Valid() {
		return operation.Operation{}, fmt.Errorf("item %s: unknown state %q", it.PK, it.State)
	}
	var err error
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&op.DueAt, it.DueAt}, {&op.LastDispatchAt, it.LastDispatchAt}, {&op.CreatedAt, it.CreatedAt}, {&op.UpdatedAt, it.UpdatedAt}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return operation.Operation{}, fmt.Errorf("item %s: bad time %q: %w", it.PK, f.src, err)
		}
	}
	op.Journal = make([]operation.Event, 0, len(it.Journal))
	for i, s := range it.Journal {
		var ev operation.Event
		if err := json.Unmarshal([]byte(s), &ev); err != nil {
			return operation.Operation{}, fmt.Errorf("item %s: journal entry %d: %w", it.PK, i, err)
		}
		op.Journal = append(op.Journal, ev)
	}
	return op, nil
}
