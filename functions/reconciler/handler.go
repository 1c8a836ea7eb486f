package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/intentgate/intentgate/internal/requestid"
)

// ErrUnsupportedEvent: the payload is neither a DynamoDB stream batch nor
// an EventBridge scheduled event.
var ErrUnsupportedEvent = errors.New("unsupported event")

// envelope is just enough of a payload to tell the two triggers apart.
type envelope struct {
	Records    []json.RawMessage `json:"Records"`
	Source     string            `json:"source"`
	DetailType string            `json:"detail-type"`
}

// handle is the Lambda handler. A stream batch returns an
// events.DynamoDBEventResponse (ReportBatchItemFailures); a scheduled event
// runs a sweep and returns its report. The invocation runs in one X-Ray
// subsegment (a Lambda facade segment takes no annotations) and its log
// lines carry the invocation's join keys.
func (r *reconciler) handle(ctx context.Context, payload json.RawMessage) (any, error) {
	// No HTTP front sets the request id here: the Lambda invocation's is
	// the one its START/END/REPORT lines and errors carry, so audit
	// records written by this invocation carry it too.
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		ctx = requestid.With(ctx, requestid.IDs{Request: lc.AwsRequestID})
	}
	ctx, done := r.app.Invocation(ctx)
	defer done()
	var out any
	err := r.app.Tracer.Segment(ctx, "intentgate-reconciler", func(ctx context.Context) error {
		var err error
		out, err = r.dispatch(ctx, payload)
		return err
	})
	return out, err
}

func (r *reconciler) dispatch(ctx context.Context, payload json.RawMessage) (any, error) {
	var env envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedEvent, err)
	}
	switch {
	case env.Records != nil:
		return r.handleStream(ctx, env.Records)
	case env.Source == "aws.events" && env.DetailType == "Scheduled Event":
		rep, err := r.svc.Sweep(ctx)
		for range rep.ClaimsLost {
			r.metrics.ClaimConflict(ctx)
		}
		// The UNKNOWN-too-old alarm watches this. 0 when the sweep saw no
		// UNKNOWN; skipped only when a failed sweep saw none (nothing known).
		if err == nil || rep.OldestUnknownAge > 0 {
			r.metrics.UnknownOldestAge(ctx, rep.OldestUnknownAge)
		}
		if err == nil || rep.OldestRetryableAge > 0 {
			r.metrics.RetryableOldestAge(ctx, rep.OldestRetryableAge)
		}
		// The unrunnable-operations alarm watches this: each is parked once.
		r.metrics.UnrunnableOperations(ctx, rep.Unrunnable)
		// The sweep-failures alarm watches this.
		r.metrics.SweepFailures(ctx, rep.Errors)
		r.auditor.Logger().LogAttrs(ctx, slog.LevelInfo, "sweep",
			slog.Int("examined", rep.Examined), slog.Int("transitions", rep.Transitions),
			slog.Int("claims_won", rep.ClaimsWon), slog.Int("claims_lost", rep.ClaimsLost),
			slog.Int("items_read", rep.ItemsRead), slog.Int("errors", rep.Errors), slog.Int("unrunnable", rep.Unrunnable), slog.String("stopped", rep.Stopped),
			slog.Duration("oldest_unknown_age", rep.OldestUnknownAge))
		if err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		return rep, nil
	}
	return nil, fmt.Errorf("%w: neither a DynamoDB stream batch nor a scheduled event", ErrUnsupportedEvent)
}

// handleStream decodes each record on its own, so one record the SDK
// types cannot decode fails alone instead of the whole batch.
func (r *reconciler) handleStream(ctx context.Context, raws []json.RawMessage) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	var batch events.DynamoDBEvent
	for i, raw := range raws {
		var head struct {
			EventSource string `json:"eventSource"`
			Change      struct {
				SequenceNumber string `json:"SequenceNumber"`
			} `json:"dynamodb"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.EventSource != "aws:dynamodb" {
			return events.DynamoDBEventResponse{}, fmt.Errorf("%w: record %d is not a DynamoDB stream record", ErrUnsupportedEvent, i)
		}
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			if head.Change.SequenceNumber == "" {
				return events.DynamoDBEventResponse{}, fmt.Errorf("stream record %d: undecodable and without a sequence number: %w", i, err)
			}
			r.auditor.Logger().LogAttrs(ctx, slog.LevelError, "stream record undecodable",
				slog.String("sequence_number", head.Change.SequenceNumber), slog.String("error", err.Error()))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: head.Change.SequenceNumber})
			continue
		}
		batch.Records = append(batch.Records, rec)
	}
	out, err := r.svc.HandleStream(ctx, batch)
	if err != nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("stream: %w", err)
	}
	resp.BatchItemFailures = append(resp.BatchItemFailures, out.BatchItemFailures...)
	for range resp.BatchItemFailures {
		r.metrics.StreamRecordFailure(ctx)
	}
	return resp, nil
}
