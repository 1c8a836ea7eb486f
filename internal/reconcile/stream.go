package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// ErrMalformedRecord: a stream record's image is not an operation we can
// act on. It is reported as a batch item failure, never skipped silently.
var ErrMalformedRecord = errors.New("malformed stream record")

// HandleStream reconciles the operations a stream batch says entered
// UNKNOWN or RETRYABLE. The image only says where to look: each operation
// is read again with a consistent Get, and reconciled only if due. Records
// for other states are ignored. A record that fails is reported in
// BatchItemFailures with its sequence number; the others are still
// processed, and the batch itself never fails for one record. Records left
// when less than Reserve remains are reported as failures so the stream
// redelivers them (the sweep would also find them).
func (s *Service) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	log := s.cfg.Auditor.Logger()
	for i, rec := range ev.Records {
		seq := rec.Change.SequenceNumber
		if left, bounded := remaining(ctx); bounded && left < s.cfg.Reserve {
			for _, rest := range ev.Records[i:] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rest.Change.SequenceNumber})
			}
			log.LogAttrs(ctx, slog.LevelWarn, "stream batch cut short by deadline reserve", slog.Int("left", len(ev.Records)-i))
			break
		}
		res, err := s.handleRecord(ctx, rec)
		if err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
			log.LogAttrs(ctx, slog.LevelError, "stream record failed",
				slog.String("sequence_number", seq), slog.String("event_id", rec.EventID), slog.String("error", err.Error()))
			continue
		}
		if res.Handle != "" {
			log.LogAttrs(ctx, slog.LevelInfo, "stream record reconciled", slog.String("sequence_number", seq),
				slog.String("from", string(res.From)), slog.String("to", string(res.To)),
				slog.String("event", string(res.Event)), slog.Bool("skipped", res.Skipped), slog.String("reason", res.Reason))
		}
	}
	return resp, nil
}

// handleRecord returns a zero Result for records it ignores.
func (s *Service) handleRecord(ctx context.Context, rec events.DynamoDBEventRecord) (Result, error) {
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
		return Result{}, nil // REMOVE (TTL) and anything else: nothing to reconcile
	}
	img := rec.Change.NewImage
	state, ok := stringAttr(img, "state")
	if !ok {
		return Result{}, nil // not an operation item (business-key items carry no state)
	}
	if st := operation.State(state); st != operation.StateUnknown && st != operation.StateRetryable {
		return Result{}, nil
	}
	handle, ok := stringAttr(img, "handle")
	if !ok {
		return Result{}, fmt.Errorf("%w: %s image has no string handle", ErrMalformedRecord, state)
	}
	if err := operation.ValidateHandle(handle); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrMalformedRecord, err)
	}
	if pk, ok := stringAttr(img, "pk"); ok && pk != "op#"+handle {
		return Result{}, fmt.Errorf("%w: pk %q does not match handle %s", ErrMalformedRecord, pk, handle)
	}
	imageVersion, err := numberAttr(img, "version")
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s: %v", ErrMalformedRecord, handle, err)
	}
	sctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
	op, err := s.st.Get(sctx, handle)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		// Gone (expired by TTL, or a table reset): nothing left to decide,
		// and redelivery could never succeed.
		return Result{Handle: handle, Skipped: true, Reason: "operation no longer stored"}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("stream %s: %w", handle, err)
	}
	if op.Version < imageVersion {
		return Result{}, fmt.Errorf("stream %s: consistent read returned version %d older than the image's %d", handle, op.Version, imageVersion)
	}
	if _, ok := s.cfg.Families[op.Key.Tool]; !ok {
		// Redelivery could never succeed here and would hold up the stream
		// shard; the sweep parks it and raises the unrunnable metric.
		return skip(Result{Handle: handle, From: op.State, To: op.State}, "no tool family here for "+op.Key.Tool+": left to the sweep"), nil
	}
	op, err = s.holdUntilDue(ctx, op)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Handle: handle, Skipped: true, Reason: "operation no longer stored"}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("stream %s: %w", handle, err)
	}
	return s.Reconcile(ctx, op)
}

// holdUntilDue waits for an operation that becomes due within
// MaxStreamWait, when the invocation has time for it, and reads it again:
// the record's first probe then comes as soon as the settle window allows,
// not at the next sweep. Anything due later is left to the sweep.
func (s *Service) holdUntilDue(ctx context.Context, op operation.Operation) (operation.Operation, error) {
	wait := op.DueAt.Sub(s.cfg.Executor.Now())
	if (op.State != operation.StateUnknown && op.State != operation.StateRetryable) || wait <= 0 || wait > s.cfg.MaxStreamWait {
		return op, nil
	}
	// Wait only if what follows (a probe, or a claim and its dispatch) still fits.
	if left, bounded := remaining(ctx); bounded && left-wait < s.cfg.Executor.ClaimNeeds() {
		return op, nil
	}
	if err := s.cfg.Sleep(ctx, wait); err != nil {
		return op, fmt.Errorf("wait until due: %w", err)
	}
	sctx, cancel := s.cfg.Executor.Budget().StoreContext(ctx)
	defer cancel()
	return s.st.Get(sctx, op.Handle)
}

func stringAttr(img map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	av, ok := img[name]
	if !ok || av.DataType() != events.DataTypeString {
		return "", false
	}
	return av.String(), true
}

func numberAttr(img map[string]events.DynamoDBAttributeValue, name string) (int64, error) {
	av, ok := img[name]
	if !ok || av.DataType() != events.DataTypeNumber {
		return 0, fmt.Errorf("%s is not a number", name)
	}
	n, err := strconv.ParseInt(av.Number(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}
