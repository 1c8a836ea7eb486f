// Package streampoll is a local stand-in for Lambda's DynamoDB event source
// mapping: it reads a table's stream with GetShardIterator and GetRecords,
// applies the mapping's FilterCriteria (internal/eventfilter), gathers up
// to BatchSize records within MaximumBatchingWindowInSeconds, hands them to
// a handler as the events.DynamoDBEvent Lambda would deliver, and retries
// from the lowest sequence number the handler reports in batchItemFailures
// (read only when FunctionResponseTypes lists ReportBatchItemFailures; the
// whole batch when the handler fails or outlives the function's Timeout),
// at most MaximumRetryAttempts times; records older than
// MaximumRecordAgeInSeconds are skipped. The settings come from the SAM
// template (TriggerFromTemplate).
//
// Not emulated: several shards and shard lineage (the local engine has one
// shard), BisectBatchOnFunctionError, ParallelizationFactor, the OnFailure
// destination (a record given up on is logged at ERROR instead), and
// stopping a handler at the timeout (its context ends and its late answer
// is discarded, but Go cannot kill it as Lambda kills the runtime).
package streampoll

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/intentgate/intentgate/internal/eventfilter"
	"github.com/intentgate/intentgate/internal/pause"
)

// StreamsAPI is the part of the DynamoDB Streams client the poller uses.
type StreamsAPI interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Handler is the function the mapping invokes: the reconciler's stream
// handler has this shape.
type Handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Config is one mapping.
type Config struct {
	StreamARN string
	Region    string // the records' awsRegion
	Trigger   Trigger
	// IdleWait is the pause after a GetRecords that returned nothing
	// (Lambda polls each shard about four times a second). Default 250ms.
	IdleWait time.Duration
	// RetryWait is the pause before a failed batch is retried. Default 1s.
	RetryWait time.Duration
	Logger    *slog.Logger
	// Now and Sleep are the clock (tests replace them). Sleep returns
	// ctx.Err() when ctx ends first.
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
}

// Poller runs one mapping; Run blocks until its context ends.
type Poller struct {
	cfg      Config
	filters  eventfilter.Criteria
	streams  StreamsAPI
	handler  Handler
	shardID  *string
	iterator *string
	lastSeq  string // sequence number of the last record read
	ahead    []events.DynamoDBEventRecord
}

// Stats counts what one batch did.
type Stats struct {
	Delivered  int // records handed to the handler (counting retries once)
	Retried    int // handler invocations beyond the first
	Failed     int // records the handler reported failed in the last attempt
	GivenUp    int // records abandoned after MaxRetryAttempts
	Filtered   int // records read and dropped by FilterCriteria
	TooOld     int // records skipped for MaximumRecordAge
	Invocation int // handler invocations
}

// New validates the mapping's filters and returns a poller; nothing is read
// until Run.
func New(streams StreamsAPI, cfg Config, handler Handler) (*Poller, error) {
	if cfg.StreamARN == "" {
		return nil, errors.New("stream poller: no stream ARN (is the table's stream enabled?)")
	}
	if cfg.Trigger.BatchSize < 1 {
		return nil, fmt.Errorf("stream poller: batch size %d", cfg.Trigger.BatchSize)
	}
	filters, err := eventfilter.CompileAll(cfg.Trigger.FilterPatterns)
	if err != nil {
		return nil, fmt.Errorf("stream poller: %w", err)
	}
	if cfg.Trigger.FunctionTimeout <= 0 {
		return nil, fmt.Errorf("stream poller: function timeout %s", cfg.Trigger.FunctionTimeout)
	}
	if cfg.IdleWait <= 0 {
		cfg.IdleWait = 250 * time.Millisecond
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = pause.Sleep
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return &Poller{cfg: cfg, filters: filters, streams: streams, handler: handler}, nil
}

// Run polls until ctx ends (then it returns nil) or the stream cannot be
// read (then it returns the error).
func (p *Poller) Run(ctx context.Context) error {
	if err := p.open(ctx, p.cfg.Trigger.StartingPosition); err != nil {
		return ignoreDone(ctx, err)
	}
	for {
		batch, st, err := p.nextBatch(ctx)
		if err != nil {
			return ignoreDone(ctx, err)
		}
		p.deliver(ctx, batch, &st)
		if st.Delivered > 0 {
			p.cfg.Logger.Info("stream batch delivered", "records", st.Delivered, "invocations", st.Invocation,
				"failed", st.Failed, "given_up", st.GivenUp, "filtered_out", st.Filtered, "too_old", st.TooOld)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (p *Poller) open(ctx context.Context, position string) error {
	if p.shardID == nil {
		out, err := p.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.cfg.StreamARN)})
		if err != nil {
			return fmt.Errorf("stream poller: describe stream: %w", err)
		}
		var open []streamtypes.Shard
		for _, sh := range out.StreamDescription.Shards {
			if sh.SequenceNumberRange == nil || sh.SequenceNumberRange.EndingSequenceNumber == nil {
				open = append(open, sh)
			}
		}
		if len(open) != 1 {
			return fmt.Errorf("stream poller: %d open shards; the local poller follows exactly one", len(open))
		}
		p.shardID = open[0].ShardId
	}
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.cfg.StreamARN), ShardId: p.shardID,
		ShardIteratorType: streamtypes.ShardIteratorType(position)}
	if p.lastSeq != "" && position == string(streamtypes.ShardIteratorTypeAfterSequenceNumber) {
		in.SequenceNumber = aws.String(p.lastSeq)
	}
	out, err := p.streams.GetShardIterator(ctx, in)
	if err != nil {
		return fmt.Errorf("stream poller: get shard iterator: %w", err)
	}
	p.iterator = out.ShardIterator
	return nil
}

// nextBatch reads until it holds BatchSize matching records, or until the
// batching window has passed since the first one arrived, and returns them.
func (p *Poller) nextBatch(ctx context.Context) ([]events.DynamoDBEventRecord, Stats, error) {
	var st Stats
	batch := p.ahead
	p.ahead = nil
	var windowEnds time.Time
	if len(batch) > 0 {
		windowEnds = p.cfg.Now().Add(p.cfg.Trigger.MaxBatchingWindow)
	}
	for {
		if len(batch) >= p.cfg.Trigger.BatchSize {
			p.ahead = batch[p.cfg.Trigger.BatchSize:]
			return batch[:p.cfg.Trigger.BatchSize], st, nil
		}
		if len(batch) > 0 && !p.cfg.Now().Before(windowEnds) {
			return batch, st, nil
		}
		recs, err := p.read(ctx)
		if err != nil {
			return nil, st, err
		}
		for _, rec := range recs {
			if p.cfg.Trigger.MaxRecordAge > 0 && p.cfg.Now().Sub(rec.Change.ApproximateCreationDateTime.Time) > p.cfg.Trigger.MaxRecordAge {
				st.TooOld++
				continue
			}
			raw, err := json.Marshal(rec)
			if err != nil {
				return nil, st, fmt.Errorf("stream poller: encode record %s: %w", rec.Change.SequenceNumber, err)
			}
			ok, err := p.filters.MatchJSON(raw)
			if err != nil {
				return nil, st, fmt.Errorf("stream poller: filter record %s: %w", rec.Change.SequenceNumber, err)
			}
			if !ok {
				st.Filtered++
				continue
			}
			if len(batch) == 0 {
				windowEnds = p.cfg.Now().Add(p.cfg.Trigger.MaxBatchingWindow)
			}
			batch = append(batch, rec)
		}
		if len(recs) == 0 && len(batch) < p.cfg.Trigger.BatchSize {
			wait := p.cfg.IdleWait
			if len(batch) > 0 {
				wait = min(wait, windowEnds.Sub(p.cfg.Now()))
			}
			if wait > 0 {
				if err := p.cfg.Sleep(ctx, wait); err != nil {
					return nil, st, err
				}
			}
		}
	}
}

// read is one GetRecords call, re-opening the iterator after it expired.
func (p *Poller) read(ctx context.Context) ([]events.DynamoDBEventRecord, error) {
	out, err := p.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: p.iterator,
		Limit: aws.Int32(int32(min(p.cfg.Trigger.BatchSize, 1000)))})
	var expired *streamtypes.ExpiredIteratorException
	var trimmed *streamtypes.TrimmedDataAccessException
	switch {
	case errors.As(err, &expired):
		position := string(streamtypes.ShardIteratorTypeAfterSequenceNumber)
		if p.lastSeq == "" {
			position = p.cfg.Trigger.StartingPosition
		}
		p.cfg.Logger.Info("stream iterator expired; reopening", "after", p.lastSeq)
		return nil, p.open(ctx, position)
	case errors.As(err, &trimmed):
		p.cfg.Logger.Warn("stream records trimmed before they were read; reopening at the oldest kept", "after", p.lastSeq)
		return nil, p.open(ctx, string(streamtypes.ShardIteratorTypeTrimHorizon))
	case err != nil:
		return nil, fmt.Errorf("stream poller: get records: %w", err)
	}
	p.iterator = out.NextShardIterator
	if p.iterator == nil {
		return nil, errors.New("stream poller: the shard was closed")
	}
	recs := make([]events.DynamoDBEventRecord, 0, len(out.Records))
	for _, r := range out.Records {
		rec, err := p.lambdaRecord(r)
		if err != nil {
			return nil, err
		}
		p.lastSeq = rec.Change.SequenceNumber
		recs = append(recs, rec)
	}
	return recs, nil
}

// deliver invokes the handler with batch and retries as Lambda does: from
// the lowest reported failure when the mapping has ReportBatchItemFailures
// (the whole batch if the handler failed, ran past the function timeout or
// named a record not in the batch), at most MaxRetryAttempts times.
func (p *Poller) deliver(ctx context.Context, batch []events.DynamoDBEventRecord, st *Stats) {
	if len(batch) == 0 {
		return
	}
	st.Delivered = len(batch)
	for attempt := 0; ; attempt++ {
		deadline := time.Now().Add(p.cfg.Trigger.FunctionTimeout)
		ictx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := p.handler(ictx, events.DynamoDBEvent{Records: batch})
		cancel()
		st.Invocation++
		// Lambda ends an invocation at the function timeout and takes it as
		// a function error: whatever the handler answers later is discarded.
		// The clock, not ictx.Err(), decides: the deadline's timer may not
		// have fired yet when a late handler returns.
		if !time.Now().Before(deadline) && ctx.Err() == nil {
			err = fmt.Errorf("invocation timed out after %s", p.cfg.Trigger.FunctionTimeout)
		}
		from := 0
		switch {
		case err != nil:
			st.Failed = len(batch)
			p.cfg.Logger.Error("stream batch failed", "records", len(batch), "attempt", attempt+1, "err", err)
		case len(resp.BatchItemFailures) == 0 || !p.cfg.Trigger.ReportBatchItemFailures:
			// Without ReportBatchItemFailures Lambda does not read the
			// answer: any successful invocation checkpoints the batch.
			st.Failed = 0
			return
		default:
			from = lowestFailure(batch, resp.BatchItemFailures)
			st.Failed = len(batch) - from
			p.cfg.Logger.Warn("stream records failed", "failed", len(resp.BatchItemFailures),
				"retry_from", batch[from].Change.SequenceNumber, "attempt", attempt+1)
		}
		if ctx.Err() != nil {
			return
		}
		if p.cfg.Trigger.MaxRetryAttempts >= 0 && attempt >= p.cfg.Trigger.MaxRetryAttempts {
			st.GivenUp = len(batch) - from
			p.cfg.Logger.Error("stream records given up after retries (Lambda would send them to the OnFailure destination)",
				"records", st.GivenUp, "first", batch[from].Change.SequenceNumber, "attempts", attempt+1)
			return
		}
		batch = batch[from:]
		st.Retried++
		if err := p.cfg.Sleep(ctx, p.cfg.RetryWait); err != nil {
			return
		}
	}
}

// lowestFailure is the index of the earliest failed record; 0 when a
// failure names no record of the batch (Lambda then retries it whole).
func lowestFailure(batch []events.DynamoDBEventRecord, failures []events.DynamoDBBatchItemFailure) int {
	index := make(map[string]int, len(batch))
	for i, r := range batch {
		index[r.Change.SequenceNumber] = i
	}
	lowest := len(batch)
	for _, f := range failures {
		i, ok := index[f.ItemIdentifier]
		if !ok {
			return 0
		}
		lowest = min(lowest, i)
	}
	return lowest
}

// lambdaRecord renders a stream record as Lambda delivers it (the JSON an
// events.DynamoDBEventRecord decodes), decoded through that same JSON.
func (p *Poller) lambdaRecord(r streamtypes.Record) (events.DynamoDBEventRecord, error) {
	sr := r.Dynamodb
	if sr == nil || sr.SequenceNumber == nil {
		return events.DynamoDBEventRecord{}, errors.New("stream poller: a record without a sequence number")
	}
	change := map[string]any{
		"Keys":           image(sr.Keys),
		"SequenceNumber": aws.ToString(sr.SequenceNumber),
		"SizeBytes":      aws.ToInt64(sr.SizeBytes),
		"StreamViewType": string(sr.StreamViewType),
	}
	if sr.ApproximateCreationDateTime != nil {
		change["ApproximateCreationDateTime"] = sr.ApproximateCreationDateTime.Unix()
	}
	if sr.NewImage != nil {
		change["NewImage"] = image(sr.NewImage)
	}
	if sr.OldImage != nil {
		change["OldImage"] = image(sr.OldImage)
	}
	raw, err := json.Marshal(map[string]any{
		"eventID":        aws.ToString(r.EventID),
		"eventName":      string(r.EventName),
		"eventVersion":   aws.ToString(r.EventVersion),
		"eventSource":    "aws:dynamodb",
		"awsRegion":      p.cfg.Region,
		"eventSourceARN": p.cfg.StreamARN,
		"dynamodb":       change,
	})
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("stream poller: encode record: %w", err)
	}
	var rec events.DynamoDBEventRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("stream poller: decode record %s: %w", aws.ToString(sr.SequenceNumber), err)
	}
	return rec, nil
}

func image(img map[string]streamtypes.AttributeValue) map[string]any {
	out := make(map[string]any, len(img))
	for k, v := range img {
		out[k] = attribute(v)
	}
	return out
}

// attribute is the typed JSON form of one attribute value ({"S": "x"}).
func attribute(av streamtypes.AttributeValue) map[string]any {
	switch v := av.(type) {
	case *streamtypes.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *streamtypes.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *streamtypes.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}
	case *streamtypes.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *streamtypes.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *streamtypes.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *streamtypes.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *streamtypes.AttributeValueMemberBS:
		bs := make([]string, len(v.Value))
		for i, b := range v.Value {
			bs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": bs}
	case *streamtypes.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = attribute(e)
		}
		return map[string]any{"L": l}
	case *streamtypes.AttributeValueMemberM:
		return map[string]any{"M": image(v.Value)}
	}
	return map[string]any{"NULL": true} // unknown member: nothing to match on
}

func ignoreDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
