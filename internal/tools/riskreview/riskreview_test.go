package riskreview_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

func TestPrepareDerivesKeysFromValidatedArguments(t *testing.T) {
	f := riskreview.New(nil, riskreview.DefaultRecovery())
	p, err := f.Prepare(context.Background(), tools.Caller{}, json.RawMessage(`{"order_id":"O20260728001","reason":"  chargeback pattern ","operation_id":"op-00000001"}`))
	require.NoError(t, err)
	assert.Equal(t, "risk_review|O20260728001|standard|g1", p.BusinessKey)
	assert.Equal(t, "op-00000001", p.OperationID)
	assert.Equal(t, map[string]string{"order_id": "O20260728001", "reason": "chargeback pattern"}, p.DigestArgs,
		"the digest binds the trimmed reason, and never the operation_id")
	assert.Equal(t, "chargeback pattern", p.Payload["reason"])
}

func TestPrepareRefusesWhatTheSchemaCannotExpress(t *testing.T) {
	f := riskreview.New(nil, riskreview.DefaultRecovery())
	cases := map[string]string{
		"malformed order":    `{"order_id":"ORDER-1","reason":"r"}`,
		"blank reason":       `{"order_id":"O20260728001","reason":"   "}`,
		"501 runes":          `{"order_id":"O20260728001","reason":"` + strings.Repeat("é", 501) + `"}`,
		"control character":  `{"order_id":"O20260728001","reason":"a\u0007b"}`,
		"unknown field":      `{"order_id":"O20260728001","reason":"r","approved":true}`,
		"bad operation id":   `{"order_id":"O20260728001","reason":"r","operation_id":"short"}`,
		"not an object":      `[1]`,
		"wrong type of data": `{"order_id":1,"reason":"r"}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.Prepare(context.Background(), tools.Caller{}, json.RawMessage(raw))
			var fail *tools.Failure
			require.ErrorAs(t, err, &fail)
			assert.Equal(t, tools.CodeInvalidArgument, fail.Code)
		})
	}
}

func TestReasonOfExactly500RunesIsAccepted(t *testing.T) {
	f := riskreview.New(nil, riskreview.DefaultRecovery())
	_, err := f.Prepare(context.Background(), tools.Caller{}, json.RawMessage(`{"order_id":"O20260728001","reason":"`+strings.Repeat("é", 500)+`"}`))
	require.NoError(t, err)
}
