package eventfilter_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/eventfilter"
)

// record is a MODIFY stream record PENDING -> UNKNOWN, shaped as Lambda
// filters it.
const record = `{
  "eventID": "7de3041dd709b024af6f29e4fa13d34c",
  "eventName": "MODIFY",
  "eventSource": "aws:dynamodb",
  "awsRegion": "eu-west-1",
  "dynamodb": {
    "ApproximateCreationDateTime": 1767225600,
    "Keys": {"pk": {"S": "op#op_abc"}},
    "NewImage": {"pk": {"S": "op#op_abc"}, "state": {"S": "UNKNOWN"}, "version": {"N": "3"},
                 "tags": {"SS": ["a", "b"]}, "flag": {"BOOL": true}, "gone": {"NULL": true}},
    "OldImage": {"pk": {"S": "op#op_abc"}, "state": {"S": "PENDING"}, "version": {"N": "2"}},
    "SequenceNumber": "4421584500000000017450439091",
    "SizeBytes": 120,
    "StreamViewType": "NEW_AND_OLD_IMAGES",
    "Weight": 12.5
  }
}`

func match(t *testing.T, pattern, event string) bool {
	t.Helper()
	p, err := eventfilter.Compile(pattern)
	require.NoError(t, err, pattern)
	ok, err := p.MatchJSON([]byte(event))
	require.NoError(t, err)
	return ok
}

func TestRulesFollowLambdaFilterSyntax(t *testing.T) {
	cases := []struct {
		name    string
		pattern string
		want    bool
	}{
		{"exact string", `{"eventName":["MODIFY"]}`, true},
		{"exact string other value", `{"eventName":["INSERT"]}`, false},
		{"OR within an array", `{"eventName":["INSERT","MODIFY"]}`, true},
		{"AND across keys, one fails", `{"eventName":["MODIFY"],"eventSource":["aws:sqs"]}`, false},
		{"AND across keys, all hold", `{"eventName":["MODIFY"],"eventSource":["aws:dynamodb"]}`, true},
		{"nested keys", `{"dynamodb":{"NewImage":{"state":{"S":["UNKNOWN"]}}}}`, true},
		{"nested keys other value", `{"dynamodb":{"NewImage":{"state":{"S":["RETRYABLE"]}}}}`, false},
		{"nested object expected, value is a leaf", `{"eventName":{"S":["MODIFY"]}}`, false},
		{"prefix", `{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"op#"}]}}}}`, true},
		{"prefix no match", `{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"bk#"}]}}}}`, false},
		{"suffix", `{"dynamodb":{"Keys":{"pk":{"S":[{"suffix":"_abc"}]}}}}`, true},
		{"equals-ignore-case", `{"eventName":[{"equals-ignore-case":"modify"}]}`, true},
		{"anything-but single value", `{"dynamodb":{"OldImage":{"state":{"S":[{"anything-but":"UNKNOWN"}]}}}}`, true},
		{"anything-but list excludes", `{"dynamodb":{"OldImage":{"state":{"S":[{"anything-but":["PENDING","UNKNOWN"]}]}}}}`, false},
		{"anything-but prefix", `{"dynamodb":{"OldImage":{"state":{"S":[{"anything-but":{"prefix":"PEN"}}]}}}}`, false},
		{"anything-but on an absent key", `{"dynamodb":{"OldImage":{"handle":{"S":[{"anything-but":"x"}]}}}}`, false},
		{"anything-but absent parent object", `{"dynamodb":{"OldImage":{"missing":{"S":[{"anything-but":"x"}]}}}}`, false},
		{"exists true", `{"dynamodb":{"OldImage":{"state":{"S":[{"exists":true}]}}}}`, true},
		{"exists true absent", `{"dynamodb":{"OldImage":{"owner":{"S":[{"exists":true}]}}}}`, false},
		{"exists false absent", `{"dynamodb":{"OldImage":{"owner":[{"exists":false}]}}}`, true},
		{"exists false present", `{"dynamodb":{"OldImage":{"state":[{"exists":false}]}}}`, false},
		{"exists true on an object is not a leaf", `{"dynamodb":{"OldImage":{"state":[{"exists":true}]}}}`, false},
		{"numeric range holds", `{"dynamodb":{"SizeBytes":[{"numeric":[">",100,"<=",120]}]}}`, true},
		{"numeric range excludes", `{"dynamodb":{"SizeBytes":[{"numeric":[">",120]}]}}`, false},
		{"numeric equals float", `{"dynamodb":{"Weight":[{"numeric":["=",12.5]}]}}`, true},
		{"exact number compares numerically", `{"dynamodb":{"SizeBytes":[120.0]}}`, true},
		{"numeric never matches a DynamoDB N string", `{"dynamodb":{"NewImage":{"version":{"N":[{"numeric":[">",0]}]}}}}`, false},
		{"N matched as its string", `{"dynamodb":{"NewImage":{"version":{"N":["3"]}}}}`, true},
		{"array value: any element", `{"dynamodb":{"NewImage":{"tags":{"SS":["b"]}}}}`, true},
		{"array value: no element", `{"dynamodb":{"NewImage":{"tags":{"SS":["c"]}}}}`, false},
		{"boolean", `{"dynamodb":{"NewImage":{"flag":{"BOOL":[true]}}}}`, true},
		{"boolean other", `{"dynamodb":{"NewImage":{"flag":{"BOOL":[false]}}}}`, false},
		{"mixed OR of rules", `{"dynamodb":{"NewImage":{"state":{"S":[{"prefix":"RET"},"UNKNOWN"]}}}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, match(t, c.pattern, record))
		})
	}
}

func TestNullAndEmptyMatchOnlyThemselves(t *testing.T) {
	ev := `{"a": null, "b": "", "c": "x"}`
	assert.True(t, match(t, `{"a":[null]}`, ev))
	assert.False(t, match(t, `{"b":[null]}`, ev))
	assert.False(t, match(t, `{"missing":[null]}`, ev), "an absent key is not null")
	assert.True(t, match(t, `{"b":[""]}`, ev))
	assert.False(t, match(t, `{"c":[""]}`, ev))
}

// The patterns a FilterCriteria has in practice: entering UNKNOWN or
// RETRYABLE from another state. Every (old, new) state pair is checked.
func TestStateEntryPatternsMatchOnlyTransitionsIntoTheState(t *testing.T) {
	criteria, err := eventfilter.CompileAll([]string{
		`{"dynamodb":{"NewImage":{"state":{"S":["UNKNOWN"]}},"OldImage":{"state":{"S":[{"anything-but":["UNKNOWN"]}]}}}}`,
		`{"dynamodb":{"NewImage":{"state":{"S":["RETRYABLE"]}},"OldImage":{"state":{"S":[{"anything-but":["RETRYABLE"]}]}}}}`,
	})
	require.NoError(t, err)
	states := []string{"PENDING", "UNKNOWN", "RETRYABLE", "SUCCEEDED", "FAILED", "ESCALATED"}
	for _, from := range states {
		for _, to := range states {
			rec := events.DynamoDBEventRecord{
				EventName: "MODIFY", EventSource: "aws:dynamodb",
				Change: events.DynamoDBStreamRecord{
					NewImage: map[string]events.DynamoDBAttributeValue{"state": events.NewStringAttribute(to)},
					OldImage: map[string]events.DynamoDBAttributeValue{"state": events.NewStringAttribute(from)},
				},
			}
			raw, err := json.Marshal(rec)
			require.NoError(t, err)
			got, err := criteria.MatchJSON(raw)
			require.NoError(t, err)
			want := from != to && (to == "UNKNOWN" || to == "RETRYABLE")
			assert.Equal(t, want, got, "%s -> %s", from, to)
		}
	}
	// An INSERT has no OldImage: these patterns leave it to the sweep.
	insert := `{"eventName":"INSERT","dynamodb":{"NewImage":{"state":{"S":"UNKNOWN"}}}}`
	got, err := criteria.MatchJSON([]byte(insert))
	require.NoError(t, err)
	assert.False(t, got)
}

func TestEmptyCriteriaMatchEverything(t *testing.T) {
	ok, err := eventfilter.Criteria(nil).MatchJSON([]byte(record))
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestInvalidPatternsAreRejectedWithTheirPath(t *testing.T) {
	cases := map[string]string{
		`not json`:                                     "invalid filter pattern",
		`["MODIFY"]`:                                   "must be a JSON object",
		`{}`:                                           "empty object",
		`{"eventName":"MODIFY"}`:                       "eventName: a value must be an object or an array",
		`{"eventName":[]}`:                             "eventName: an empty array",
		`{"a":{"b":[{"wildcard":"x*"}]}}`:              `a.b[0]: unknown operator "wildcard"`,
		`{"a":[{"prefix":1}]}`:                         `"prefix" needs a string`,
		`{"a":[{"exists":"yes"}]}`:                     `"exists" needs true or false`,
		`{"a":[{"numeric":[">"]}]}`:                    `"numeric" needs`,
		`{"a":[{"numeric":["~",1]}]}`:                  `unknown numeric operator "~"`,
		`{"a":[{"numeric":["<",5,">",1]}]}`:            "a numeric range",
		`{"a":[{"numeric":[">",5,"<",1]}]}`:            "low <= high",
		`{"a":[{"numeric":[">","5"]}]}`:                "not a number",
		`{"a":[{"anything-but":[]}]}`:                  "at least one value",
		`{"a":[{"anything-but":[{"prefix":"x"}]}]}`:    "must be a plain value",
		`{"a":[{"anything-but":{"numeric":[">",1]}}]}`: `not "numeric"`,
		`{"a":[{"prefix":"x","suffix":"y"}]}`:          "exactly one operator",
		`{"a":[["x"]]}`:                                "a rule must be a value or an operator object",
		`{"a":["x"]} {"b":["y"]}`:                      "trailing data",
	}
	for pattern, want := range cases {
		_, err := eventfilter.Compile(pattern)
		require.Error(t, err, pattern)
		assert.ErrorIs(t, err, eventfilter.ErrInvalidPattern, pattern)
		assert.Contains(t, err.Error(), want, pattern)
	}
	_, err := eventfilter.CompileAll([]string{`{"a":["x"]}`, `{"a":"x"}`})
	assert.ErrorContains(t, err, "filter 1:")
}

func TestUndecodableEventIsAnError(t *testing.T) {
	p, err := eventfilter.Compile(`{"a":["x"]}`)
	require.NoError(t, err)
	_, err = p.MatchJSON([]byte(`{"a":`))
	assert.Error(t, err)
	ok, err := p.MatchJSON([]byte(`["x"]`))
	require.NoError(t, err)
	assert.False(t, ok, "an event that is not an object matches no pattern")
}
