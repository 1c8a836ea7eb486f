package enginetest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/store"
)

// NewStore returns a store on a fresh table of this engine, named by
// TableName(t), created with EnsureTable and deleted when the test ends.
func (e *Engine) NewStore(t testing.TB) *store.Store {
	t.Helper()
	db, err := e.Client(context.Background())
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	st, err := store.New(db, store.Config{Table: TableName(t)})
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	EnsureTable(t, st)
	return st
}

// EnsureTable creates st's table (store.EnsureTable) for a store built
// elsewhere, e.g. by the composition root from test environment values,
// and deletes the table when the test ends.
func EnsureTable(t testing.TB, st *store.Store) {
	t.Helper()
	if err := st.EnsureTable(context.Background()); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := st.DeleteTable(context.Background()); err != nil {
			t.Errorf("test cleanup: %v", err)
		}
	})
}

// NamesOperation reports whether an engine request names an operation item
// (op#...), as against the table's recorded due shard counts, for test
// transports that lose or count "the first UpdateItem" of an operation.
// The body is left readable for the request to be sent.
func NamesOperation(req *http.Request) bool {
	if req.Body == nil {
		return false
	}
	body, err := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte(`"op#`))
}

// WritesBinding reports whether req (a TransactWriteItems) writes a
// binding: a request key answered with another key's operation. It reads
// the body and puts it back.
func WritesBinding(req *http.Request) bool {
	if req.Body == nil {
		return false
	}
	body, err := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte(`{"S":"binding"}`))
}

// Expire deletes an operation's item from st's table, as DynamoDB's TTL
// does once a FAILED operation's retention has passed.
func (e *Engine) Expire(t testing.TB, st *store.Store, handle string) {
	t.Helper()
	db, err := e.Client(context.Background())
	if err != nil {
		t.Fatalf("expire: %v", err)
	}
	_, err = db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(st.Table()),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "op#" + handle}}})
	if err != nil {
		t.Fatalf("expire %s: %v", handle, err)
	}
}
