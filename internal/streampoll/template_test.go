package streampoll_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/eventfilter"
	"github.com/intentgate/intentgate/internal/streampoll"
)

func writeTemplate(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const sampleTemplate = `
Globals:
  Function:
    Timeout: 20
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 45
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 7
            MaximumBatchingWindowInSeconds: 2
            MaximumRetryAttempts: 4
            MaximumRecordAgeInSeconds: 600
            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"dynamodb":{"NewImage":{"state":{"S":["A"]}}}}'
                - Pattern: '{"dynamodb":{"NewImage":{"state":{"S":["B"]}}}}'
        Sweep:
          Type: Schedule
          Properties:
            Schedule: rate(5 minutes)
`

func TestTriggerIsReadFromTheFunctionsEvents(t *testing.T) {
	tr, err := streampoll.TriggerFromTemplate(writeTemplate(t, sampleTemplate), "Fn")
	require.NoError(t, err)
	assert.Equal(t, streampoll.Trigger{
		BatchSize: 7, MaxBatchingWindow: 2 * time.Second, StartingPosition: "TRIM_HORIZON",
		FilterPatterns: []string{
			`{"dynamodb":{"NewImage":{"state":{"S":["A"]}}}}`,
			`{"dynamodb":{"NewImage":{"state":{"S":["B"]}}}}`,
		},
		MaxRetryAttempts: 4, MaxRecordAge: 10 * time.Minute, ReportBatchItemFailures: true,
		FunctionTimeout: 45 * time.Second, SweepEvery: 5 * time.Minute,
	}, tr)
}

// Partial batch responses are off unless FunctionResponseTypes asks for
// them, as in Lambda.
func TestReportBatchItemFailuresIsOffUnlessFunctionResponseTypesListsIt(t *testing.T) {
	body := replaceOnce(t, sampleTemplate, "            FunctionResponseTypes: [ReportBatchItemFailures]\n", "")
	tr, err := streampoll.TriggerFromTemplate(writeTemplate(t, body), "Fn")
	require.NoError(t, err)
	assert.False(t, tr.ReportBatchItemFailures)

	body = replaceOnce(t, sampleTemplate, "[ReportBatchItemFailures]", "[]")
	tr, err = streampoll.TriggerFromTemplate(writeTemplate(t, body), "Fn")
	require.NoError(t, err)
	assert.False(t, tr.ReportBatchItemFailures)

	body = replaceOnce(t, sampleTemplate, "[ReportBatchItemFailures]", "\n              - ReportBatchItemFailures")
	tr, err = streampoll.TriggerFromTemplate(writeTemplate(t, body), "Fn")
	require.NoError(t, err)
	assert.True(t, tr.ReportBatchItemFailures, "the block form of the list")
}

// The repository's own template loads, and its filters compile.
func TestRepositoryTemplateHasAUsableReconcilerTrigger(t *testing.T) {
	tr := repoTemplate(t)
	assert.Positive(t, tr.BatchSize)
	assert.Positive(t, tr.SweepEvery)
	assert.Positive(t, tr.FunctionTimeout)
	_, err := eventfilter.CompileAll(tr.FilterPatterns)
	assert.NoError(t, err)
}

func TestTemplateErrorsNameTheSetting(t *testing.T) {
	cases := map[string]string{
		"BatchSize: 7":                      "BatchSize: 0",
		"rate(5 minutes)":                   "cron(0 * * * ? *)",
		"MaximumBatchingWindowInSeconds: 2": "MaximumBatchingWindowInSeconds: !Ref Window",
		"StartingPosition: TRIM_HORIZON":    "StartingPosition: AT_TIMESTAMP",
		"[ReportBatchItemFailures]":         "[ReportBatchItemFailure]",
		"FunctionResponseTypes: [":          "FunctionResponseTypes: !Ref Types # [",
	}
	wants := map[string]string{
		"BatchSize: 7":                      "BatchSize 0",
		"rate(5 minutes)":                   "only rate(...)",
		"MaximumBatchingWindowInSeconds: 2": "not a literal number",
		"StartingPosition: TRIM_HORIZON":    "StartingPosition",
		"[ReportBatchItemFailures]":         `FunctionResponseTypes[0] "ReportBatchItemFailure"`,
		"FunctionResponseTypes: [":          "FunctionResponseTypes is not a literal list",
	}
	for from, to := range cases {
		body := replaceOnce(t, sampleTemplate, from, to)
		_, err := streampoll.TriggerFromTemplate(writeTemplate(t, body), "Fn")
		assert.ErrorContains(t, err, wants[from], to)
	}
	_, err := streampoll.TriggerFromTemplate(writeTemplate(t, sampleTemplate), "Missing")
	assert.ErrorContains(t, err, "no resource Missing")
	_, err = streampoll.TriggerFromTemplate(filepath.Join(t.TempDir(), "none.yaml"), "Fn")
	assert.ErrorContains(t, err, "read template")
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, from)
	return s[:i] + to + s[i+len(from):]
}
