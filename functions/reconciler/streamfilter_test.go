package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/intentgate/intentgate/internal/eventfilter"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// TestStreamFilterWakesTheReconcilerOnlyOnEntryIntoUnknownOrRetryable
// evaluates template.yaml's FilterCriteria, with Lambda's filter semantics,
// against the stream records our own writes produce on the table: a
// success, an UNKNOWN resolved by a probe, and an UNKNOWN proven absent that
// becomes RETRYABLE and is re-sent. A record wakes the reconciler exactly
// when its new state is UNKNOWN or RETRYABLE and its old state differs; an
// INSERT (always PENDING) and business-key items never do.
func TestStreamFilterWakesTheReconcilerOnlyOnEntryIntoUnknownOrRetryable(t *testing.T) {
	criteria, patterns := templateStreamFilter(t)
	for _, p := range patterns {
		var top map[string]any
		require.NoError(t, json.Unmarshal([]byte(p), &top))
		for k := range top {
			assert.Equal(t, "dynamodb", k, "Lambda filters DynamoDB records on the dynamodb key only: %s", p)
		}
	}

	h := newHarness(t)
	ctx := context.Background()
	reader := newStreamReader(t, h.st.Table())

	h.submit(t, "op-filter-success", "O20260728011")
	probed := h.submitUnknown(t, "op-filter-probed", "O20260728012")
	require.NoError(t, h.sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	absent := h.submit(t, "op-filter-absent", "O20260728013")
	require.Equal(t, operation.StateUnknown, absent.State)

	// Past both settle points: one sweep resolves the committed one by a
	// probe and proves the other absent (RETRYABLE); the next claims and
	// re-sends it.
	settled := h.r.app.Executor.SettledAt(absent, riskreview.DefaultRecovery().SettleWindow)
	if s := h.r.app.Executor.SettledAt(probed, riskreview.DefaultRecovery().SettleWindow); s.After(settled) {
		settled = s
	}
	h.clock.Advance(settled.Sub(h.clock.Now()) + time.Second)
	for range 3 {
		_, err := h.r.svc.Sweep(ctx)
		require.NoError(t, err)
		h.clock.Advance(2 * time.Minute)
	}

	records := reader.records(t)
	seen := map[string]int{}
	for _, rec := range records {
		newState, hasNew := stateOf(rec.Dynamodb.NewImage)
		oldState, hasOld := stateOf(rec.Dynamodb.OldImage)
		got, err := criteria.MatchJSON(rec.raw)
		require.NoError(t, err)
		want := hasNew && hasOld && newState != oldState &&
			(newState == string(operation.StateUnknown) || newState == string(operation.StateRetryable))
		assert.Equal(t, want, got, "%s %s -> %s: %s", rec.EventName, oldState, newState, rec.raw)
		if rec.EventName == "INSERT" && hasNew {
			assert.Equal(t, string(operation.StatePending), newState, "operations are inserted PENDING")
		}
		switch {
		case got:
			seen["wake "+newState]++
		case rec.EventName == "INSERT":
			seen["insert"]++
		case hasNew && hasOld:
			seen["quiet modify"]++
		}
	}
	// The writes above must have produced every kind of record, or the
	// assertions above proved nothing.
	for _, kind := range []string{"wake UNKNOWN", "wake RETRYABLE", "insert", "quiet modify"} {
		assert.Positive(t, seen[kind], "no %q record among %d: %v", kind, len(records), seen)
	}
	got, err := h.st.Get(ctx, absent.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, got.State, "the absent create was re-sent")
}

// templateStreamFilter reads the reconciler's stream FilterCriteria.
func templateStreamFilter(t *testing.T) (eventfilter.Criteria, []string) {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	require.NoError(t, err)
	var tpl struct {
		Resources map[string]struct {
			Properties struct {
				Events map[string]struct {
					Properties struct {
						FilterCriteria struct {
							Filters []struct {
								Pattern string `yaml:"Pattern"`
							} `yaml:"Filters"`
						} `yaml:"FilterCriteria"`
					} `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tpl))
	ev, ok := tpl.Resources["ReconcilerFunction"].Properties.Events["OperationsStream"]
	require.True(t, ok, "ReconcilerFunction has no OperationsStream event")
	var patterns []string
	for _, f := range ev.Properties.FilterCriteria.Filters {
		patterns = append(patterns, f.Pattern)
	}
	require.NotEmpty(t, patterns)
	c, err := eventfilter.CompileAll(patterns)
	require.NoError(t, err)
	return c, patterns
}

// streamRecord is one record exactly as DynamoDB Streams returned it (the
// JSON Lambda's event carries and filters on), with the fields the test reads.
type streamRecord struct {
	EventName string `json:"eventName"`
	Dynamodb  struct {
		NewImage map[string]map[string]any `json:"NewImage"`
		OldImage map[string]map[string]any `json:"OldImage"`
	} `json:"dynamodb"`
	raw json.RawMessage
}

func stateOf(image map[string]map[string]any) (string, bool) {
	s, ok := image["state"]["S"].(string)
	return s, ok
}

// streamReader reads the table's stream from its start, keeping the raw
// GetRecords response bodies (the SDK's decoded types lose the wire JSON).
type streamReader struct {
	client *dynamodbstreams.Client
	arn    string
	bodies *[][]byte
}

func newStreamReader(t *testing.T, table string) streamReader {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(regionOr(engine.Region())),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	require.NoError(t, err)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(engine.Endpoint()) })
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.NotNil(t, desc.Table.LatestStreamArn, "the table has no stream")
	bodies := &[][]byte{}
	client := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(engine.Endpoint())
		o.HTTPClient = &http.Client{Transport: keepBodies{base: http.DefaultTransport, bodies: bodies}}
	})
	return streamReader{client: client, arn: *desc.Table.LatestStreamArn, bodies: bodies}
}

func regionOr(r string) string {
	if r == "" {
		return "us-east-1"
	}
	return r
}

func (s streamReader) records(t *testing.T) []streamRecord {
	t.Helper()
	ctx := context.Background()
	desc, err := s.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)})
	require.NoError(t, err)
	*s.bodies = nil
	for _, shard := range desc.StreamDescription.Shards {
		it, err := s.client.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(s.arn), ShardId: shard.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		require.NoError(t, err)
		iter := it.ShardIterator
		for iter != nil {
			out, err := s.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			require.NoError(t, err)
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	var recs []streamRecord
	for _, body := range *s.bodies {
		var page struct {
			Records []json.RawMessage `json:"Records"`
		}
		if json.Unmarshal(body, &page) != nil {
			continue // DescribeStream / GetShardIterator answers
		}
		for _, raw := range page.Records {
			var rec streamRecord
			require.NoError(t, json.Unmarshal(raw, &rec))
			rec.raw = raw
			recs = append(recs, rec)
		}
	}
	require.NotEmpty(t, recs, "the stream returned no records")
	return recs
}

// keepBodies records every response body it passes through.
type keepBodies struct {
	base   http.RoundTripper
	bodies *[][]byte
}

func (k keepBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	*k.bodies = append(*k.bodies, b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// The sample stream events pass the template's filter record by record as
// events/README.md says.
func TestSampleStreamEventsPassTheTemplateFilterAsDocumented(t *testing.T) {
	criteria, _ := templateStreamFilter(t)
	for file, want := range map[string][]bool{
		"stream-unknown.json":  {true},
		"stream-ignored.json":  {false},
		"stream-poisoned.json": {true, true, true},
	} {
		var ev struct {
			Records []json.RawMessage `json:"Records"`
		}
		require.NoError(t, json.Unmarshal(sample(t, file), &ev))
		var got []bool
		for _, rec := range ev.Records {
			ok, err := criteria.MatchJSON(rec)
			require.NoError(t, err)
			got = append(got, ok)
		}
		assert.Equal(t, want, got, file)
	}
}
