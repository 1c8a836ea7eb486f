package mcpserver

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBusinessErrorCarriesTheEnvelopeAsStructuredContentAndText(t *testing.T) {
	res := BusinessError("IDEMPOTENCY_CONFLICT", "key reused with different arguments", false, &NextAction{
		Tool:      "get_operation",
		Arguments: map[string]string{"operation_id": "op-1"},
		Hint:      "query the first operation",
	})
	assert.True(t, res.IsError)
	want := `{"code":"IDEMPOTENCY_CONFLICT","message":"key reused with different arguments","retry_allowed":false,` +
		`"next_action":{"tool":"get_operation","arguments":{"operation_id":"op-1"},"hint":"query the first operation"}}`
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	assert.JSONEq(t, want, string(data))
	require.Len(t, res.Content, 1)
	assert.JSONEq(t, want, res.Content[0].(*mcp.TextContent).Text)

	_, err = mustEnvelope(t, testCodes).validateJSON(data)
	assert.NoError(t, err)
}

func TestBusinessErrorWithoutNextActionOmitsIt(t *testing.T) {
	data, err := json.Marshal(BusinessError("OVERLOADED", "busy", true, nil).StructuredContent)
	require.NoError(t, err)
	assert.JSONEq(t, `{"code":"OVERLOADED","message":"busy","retry_allowed":true}`, string(data))
}

func TestSuccessAndResult(t *testing.T) {
	ok := Success(map[string]string{"review_id": "R1", "status": "PENDING"})
	assert.False(t, ok.IsError)
	assert.JSONEq(t, `{"review_id":"R1","status":"PENDING"}`, ok.Content[0].(*mcp.TextContent).Text)

	unknown := Result(map[string]string{"operation_id": "op-1", "outcome": "dispatch_acknowledged_response_missing"}, true)
	assert.True(t, unknown.IsError)
	assert.JSONEq(t, `{"operation_id":"op-1","outcome":"dispatch_acknowledged_response_missing"}`,
		unknown.Content[0].(*mcp.TextContent).Text)
}

func TestUnencodableResultBecomesOperationUnknown(t *testing.T) {
	res := Success(map[string]float64{"x": math.NaN()})
	assert.True(t, res.IsError)
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var body ErrorBody
	require.NoError(t, json.Unmarshal(data, &body))
	assert.Equal(t, CodeOperationUnknown, body.Code)
}

func TestTheEnvelopeAdmitsTheRegisteredCodesAndThisPackagesOwnOnly(t *testing.T) {
	envelope := mustEnvelope(t, []string{"NOT_FOUND"})
	for _, code := range []string{"NOT_FOUND", CodeInvalidArgument, CodeOperationUnknown} {
		data, err := json.Marshal(BusinessError(code, "m", false, nil).StructuredContent)
		require.NoError(t, err)
		_, err = envelope.validateJSON(data)
		assert.NoError(t, err, code)
	}
	for _, code := range []string{"FORBIDDEN", ""} {
		data, err := json.Marshal(BusinessError(code, "m", false, nil).StructuredContent)
		require.NoError(t, err)
		_, err = envelope.validateJSON(data)
		assert.Error(t, err, "a code nobody registered: %q", code)
	}
}

func TestEveryCodeIsInTheEnvelopeSchema(t *testing.T) {
	envelope := mustEnvelope(t, testCodes)
	for _, code := range testCodes {
		data, err := json.Marshal(BusinessError(code, "m", false, nil).StructuredContent)
		require.NoError(t, err)
		_, err = envelope.validateJSON(data)
		assert.NoError(t, err, code)
	}
}
