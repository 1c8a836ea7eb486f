package requestid

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnsureKeepsTheFrontsIDs(t *testing.T) {
	ctx := With(context.Background(), IDs{Request: "lambda-req", Gateway: "apigw-req"})
	got, ids := Ensure(ctx)
	assert.Equal(t, IDs{Request: "lambda-req", Gateway: "apigw-req"}, ids)
	assert.Equal(t, ids, From(got))
}

func TestEnsureMintsARequestIDWhenNoFrontSetOne(t *testing.T) {
	ctx, ids := Ensure(context.Background())
	assert.Len(t, ids.Request, 36)
	assert.Empty(t, ids.Gateway)
	assert.Equal(t, ids, From(ctx), "the minted id is what later readers see")
	_, again := Ensure(ctx)
	assert.Equal(t, ids.Request, again.Request, "minted once per request")
}

func TestFromWithoutIDsIsZero(t *testing.T) {
	assert.Equal(t, IDs{}, From(context.Background()))
}
