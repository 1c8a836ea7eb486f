package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/intentgate/intentgate/internal/localengine"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/streampoll"
)

// reconcilerFunction is the template's logical id of the reconciler, whose
// DynamoDB event (batch size, window, FilterCriteria, retries) the
// campaign's stream entry point follows.
const reconcilerFunction = "ReconcilerFunction"

// streamTrigger reads the reconciler's event source mapping from the SAM
// template at the repository root. The campaign starts each cell's poller
// after its table exists, while in production the mapping exists before
// the first write; reading from TRIM_HORIZON of a fresh table is what
// LATEST at creation would have delivered.
func streamTrigger() (streampoll.Trigger, error) {
	root, err := localengine.RepoRoot()
	if err != nil {
		return streampoll.Trigger{}, fmt.Errorf("chaos: stream trigger: %w", err)
	}
	tr, err := streampoll.TriggerFromTemplate(filepath.Join(root, "template.yaml"), reconcilerFunction)
	if err != nil {
		return streampoll.Trigger{}, fmt.Errorf("chaos: stream trigger: %w", err)
	}
	tr.StartingPosition = string(streamtypes.ShardIteratorTypeTrimHorizon)
	return tr, nil
}

// streamer runs the reconciler's stream entry point of a cell: a local
// event source mapping reads the table's stream and hands every batch to
// reconcile.Service.HandleStream of the cell's stream reconciler, a
// process of its own (its own skewed clock and faulty store), as a second
// Lambda instance would be. It returns when ctx ends; a stream that
// cannot be read is reported on Progress and ends the entry point (the
// sweep still runs; the summary counts the failure).
func (c *cell) streamer(ctx context.Context) {
	if err := c.runStream(ctx); err != nil {
		c.streamErr.Store(err.Error())
		fmt.Fprintf(c.cfg.Progress, "chaos: cell %d: stream entry point stopped: %v\n", c.idx, err)
	}
}

func (c *cell) runStream(ctx context.Context) error {
	svc, err := c.streamRecon.app.Reconciler()
	if err != nil {
		return fmt.Errorf("chaos: stream reconciler: %w", err)
	}
	db, err := c.dynamo(ctx, "stream", nil)
	if err != nil {
		return err
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.table)})
	if err != nil {
		return fmt.Errorf("chaos: describe table %s: %w", c.table, err)
	}
	streams, err := c.streamsClient(ctx)
	if err != nil {
		return err
	}
	poller, err := streampoll.New(streams, streampoll.Config{
		StreamARN: aws.ToString(desc.Table.LatestStreamArn), Region: c.appCfg.Region, Trigger: c.trigger,
		IdleWait: c.cfg.StreamIdleWait,
	}, c.streamStats.count(svc.HandleStream))
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	if err := poller.Run(ctx); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

// streamsClient reaches the cell's engine's stream API, as the store's
// client reaches its table API.
func (c *cell) streamsClient(ctx context.Context) (*dynamodbstreams.Client, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(c.appCfg.Region),
		config.WithCredentialsProvider(aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("local", "local", ""))))
	if err != nil {
		return nil, fmt.Errorf("chaos: aws config: %w", err)
	}
	return dynamodbstreams.NewFromConfig(awsCfg, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(c.endpoint)
		next := store.ClosedBodySafeHTTPClient(o.HTTPClient)
		if c.meter != nil {
			next = c.meter.wrap("stream", next)
		}
		o.HTTPClient = next
	}), nil
}

// streamStats counts what the stream entry point handled, for the summary.
type streamStats struct {
	batches, records, failedRecords, failedBatches atomic.Int64
}

// StreamCounts is what the stream entry point handled in a campaign.
type StreamCounts struct {
	Batches, Records, FailedRecords, FailedBatches int64
	Stopped                                        []string // cells whose poller stopped, and why
}

func (s *streamStats) count(h streampoll.Handler) streampoll.Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp, err := h(ctx, ev)
		s.batches.Add(1)
		s.records.Add(int64(len(ev.Records)))
		if err != nil {
			s.failedBatches.Add(1)
		}
		s.failedRecords.Add(int64(len(resp.BatchItemFailures)))
		return resp, err
	}
}
