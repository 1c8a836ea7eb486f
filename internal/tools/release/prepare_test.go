package release_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

func TestPrepareAndInputSchemaAgree(t *testing.T) {
	family := release.New(nil, grants, release.DefaultRecovery())
	input := schema(t, release.InputSchema())
	for _, tc := range []struct {
		name  string
		raw   string
		valid bool
	}{
		{"minimal", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, true},
		{"with key", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu","operation_id":"deploy-ticket-payments-8bc911d"}`, true},
		{"full sha", `{"service":"payments-api","commit":"` + strings.Repeat("a", 40) + `","environment":"production-eu"}`, true},
		{"unknown field", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu","force":true}`, false},
		{"missing environment", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234"}`, false},
		{"uppercase commit", `{"service":"payments-api","commit":"8BC911D0A3C4E5F60718293A4B5C6D7E8F901234","environment":"production-eu"}`, false},
		{"short commit", `{"service":"payments-api","commit":"8bc91","environment":"production-eu"}`, false},
		{"abbreviated commit", `{"service":"payments-api","commit":"8bc911d","environment":"production-eu"}`, false},
		{"sha-256 commit", `{"service":"payments-api","commit":"` + strings.Repeat("a", 64) + `","environment":"production-eu"}`, false},
		{"long commit", `{"service":"payments-api","commit":"` + strings.Repeat("a", 41) + `","environment":"production-eu"}`, false},
		{"service starts with digit", `{"service":"1payments","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, false},
		{"service with slash", `{"service":"payments/api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, false},
		{"longest service", `{"service":"s` + strings.Repeat("x", 62) + `","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, true},
		{"long service", `{"service":"s` + strings.Repeat("x", 63) + `","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, false},
		{"one-letter service", `{"service":"p","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"}`, false},
		{"one-letter environment", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"p"}`, false},
		{"long environment", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"e` + strings.Repeat("x", 32) + `"}`, false},
		{"short operation id", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu","operation_id":"abc"}`, false},
		{"operation id with space", `{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu","operation_id":"deploy ticket 1"}`, false},
		{"wrong type", `{"service":"payments-api","commit":8,"environment":"production-eu"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var generic any
			require.NoError(t, json.Unmarshal([]byte(tc.raw), &generic))
			schemaErr := input.Validate(generic)
			_, prepErr := family.Prepare(context.Background(), alice, json.RawMessage(tc.raw))
			if tc.valid {
				assert.NoError(t, schemaErr)
				assert.NoError(t, prepErr)
				return
			}
			assert.Error(t, schemaErr, "the schema must refuse it")
			requireFailure(t, prepErr, tools.CodeInvalidArgument)
		})
	}
	_, err := family.Prepare(context.Background(), alice, json.RawMessage(`{"service":"payments-api","commit":"8bc911d0a3c4e5f60718293a4b5c6d7e8f901234","environment":"production-eu"} {}`))
	requireFailure(t, err, tools.CodeInvalidArgument)
}

// One ticket per service + commit + environment: a commit spelled two
// ways (an abbreviation and its full id, or two abbreviations) would be two
// business keys and could make two tickets, so only the full id is taken,
// and anything else is refused before anything is stored.
func TestACommitIsTakenOnlyByItsFullIDSoOneCommitIsOneBusinessFact(t *testing.T) {
	family := release.New(nil, grants, release.DefaultRecovery())
	const full = "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234"
	for _, abbrev := range []string{full[:7], full[:12], full[:39]} {
		_, err := family.Prepare(context.Background(), alice, json.RawMessage(`{"service":"payments-api","commit":"`+abbrev+`","environment":"production-eu"}`))
		f := requireFailure(t, err, tools.CodeInvalidArgument)
		assert.Contains(t, f.Message, "full commit id", abbrev)
	}
	p, err := family.Prepare(context.Background(), alice, json.RawMessage(`{"service":"payments-api","commit":"`+full+`","environment":"production-eu"}`))
	require.NoError(t, err)
	assert.Contains(t, p.BusinessKey, full)
}

func TestPrepareBindsEveryTargetFieldIntoKeyAndDigest(t *testing.T) {
	family := release.New(nil, grants, release.DefaultRecovery())
	p, err := family.Prepare(context.Background(), alice, paymentsArgs)
	require.NoError(t, err)
	assert.Equal(t, "deployment_ticket|payments-api|8bc911d0a3c4e5f60718293a4b5c6d7e8f901234|production-eu", p.BusinessKey)
	assert.Equal(t, "deploy-ticket-payments-8bc911d", p.OperationID)
	assert.Equal(t, paymentsTarget(), p.Target)
	assert.Equal(t, paymentsTarget(), p.Payload)

	base, err := operation.RequestDigest(release.ToolCreate, alice.UserID, p.DigestArgs)
	require.NoError(t, err)
	for _, changed := range [][]byte{
		args("payments-api", "9f00aa1", "production-eu", ""),
		args("payments-api", "8bc911d", "staging-eu", ""),
		args("payments-worker", "8bc911d", "production-eu", ""),
	} {
		q, err := family.Prepare(context.Background(), alice, changed)
		require.NoError(t, err)
		d, err := operation.RequestDigest(release.ToolCreate, alice.UserID, q.DigestArgs)
		require.NoError(t, err)
		assert.NotEqual(t, base, d)
		assert.NotEqual(t, p.BusinessKey, q.BusinessKey)
	}
	noKey, err := family.Prepare(context.Background(), alice, args("payments-api", "8bc911d", "production-eu", ""))
	require.NoError(t, err)
	d, err := operation.RequestDigest(release.ToolCreate, alice.UserID, noKey.DigestArgs)
	require.NoError(t, err)
	assert.Equal(t, base, d, "operation_id is the key, not part of the intent")
}

func TestOtherSchemasCompileAndAcceptTheirShapes(t *testing.T) {
	handle := "op_" + strings.Repeat("a", 26)
	for _, tc := range []struct {
		name, doc string
		good      []string
		bad       []string
	}{
		{"approve", release.ApproveInputSchema(),
			[]string{`{"operation_id":"deploy-ticket-1"}`, `{"ticket_handle":"` + handle + `"}`},
			[]string{`{}`, `{"operation_id":"deploy-ticket-1","ticket_handle":"` + handle + `"}`, `{"operation_id":"deploy-ticket-1","force":true}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := schema(t, tc.doc)
			for _, raw := range tc.good {
				var v any
				require.NoError(t, json.Unmarshal([]byte(raw), &v))
				assert.NoError(t, r.Validate(v), raw)
			}
			for _, raw := range tc.bad {
				var v any
				require.NoError(t, json.Unmarshal([]byte(raw), &v))
				assert.Error(t, r.Validate(v), raw)
			}
		})
	}
	schema(t, release.OutputSchema())
	schema(t, release.ApproveOutputSchema())
}
