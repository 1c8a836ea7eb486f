package localengine

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests start their own moto engines because they check the process
// lifecycle itself.

// startOwnMoto starts a moto engine for this test alone, whatever engine
// the environment names, with a client for it; stopped at cleanup.
func startOwnMoto(t *testing.T) (*Engine, *dynamodb.Client) {
	t.Helper()
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvKind, "")
	e, err := Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop() })
	client, err := e.Client(context.Background())
	require.NoError(t, err)
	return e, client
}

func TestStartedMotoAnswersAndStopLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	e, client := startOwnMoto(t)
	assert.Equal(t, KindMoto, e.Kind())
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, e.Endpoint())
	pid := e.proc.cmd.Process.Pid

	out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	assert.Empty(t, out.TableNames)

	require.NoError(t, e.Stop())
	require.NoError(t, e.Stop(), "second Stop is harmless")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "engine process still exists")

	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = client.ListTables(callCtx, &dynamodb.ListTablesInput{})
	assert.Error(t, err, "stopped engine still answers")
}

func TestResetDropsMotoTables(t *testing.T) {
	ctx := context.Background()
	e, client := startOwnMoto(t)

	_, err := client.CreateTable(ctx, minimalTable("reset-me"))
	require.NoError(t, err)
	out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	require.Len(t, out.TableNames, 1)

	require.NoError(t, e.Reset(ctx))
	out, err = client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	assert.Empty(t, out.TableNames)
}

func TestStartWithoutVenvSaysHowToInstall(t *testing.T) {
	_, err := startMoto(context.Background(), t.TempDir())
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotInstalled))
	assert.Contains(t, err.Error(), "run `make venv` (make test does it)")
}

func TestStartUsesConfiguredEngine(t *testing.T) {
	tests := []struct {
		name, endpoint, kind   string
		wantEndpoint, wantKind string
	}{
		{"endpoint without kind is external", "http://localhost:4566/", "", "http://localhost:4566", KindExternal},
		{"endpoint with kind", "http://localhost:4566", "localstack", "http://localhost:4566", "localstack"},
		{"dynamodb kind without endpoint is real AWS", "", KindDynamoDB, "", KindDynamoDB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvEndpoint, tt.endpoint)
			t.Setenv(EnvKind, tt.kind)
			e, err := Start(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.wantEndpoint, e.Endpoint())
			assert.Equal(t, tt.wantKind, e.Kind())
			assert.Nil(t, e.proc, "no process started for a configured engine")
			assert.NoError(t, e.Stop())
			assert.NoError(t, e.Reset(context.Background()), "Reset is a no-op off moto")
		})
	}
}

func TestStartRefusesUnknownKindWithoutEndpoint(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvKind, "localstack")
	_, err := Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), EnvEndpoint)
}

// An HTTP client dials a connection for a request it then cancels and keeps
// it idle (90 s by default); the engine must go on serving everyone else.
func TestAnIdleConnectionDoesNotBlockOtherClients(t *testing.T) {
	ctx := context.Background()
	e, client := startOwnMoto(t)
	idle, err := net.Dial("tcp", strings.TrimPrefix(e.Endpoint(), "http://"))
	require.NoError(t, err)
	defer idle.Close()
	half, err := net.Dial("tcp", strings.TrimPrefix(e.Endpoint(), "http://"))
	require.NoError(t, err)
	defer half.Close()
	_, err = half.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\n")) // headers never finished
	require.NoError(t, err)

	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = client.ListTables(callCtx, &dynamodb.ListTablesInput{})
	assert.NoError(t, err, "a request behind an idle and a half-sent connection is answered")
}

// A client that sent a request's headers and part of its body, then
// stalls (a process stopped or paused in a debugger, a writer descheduled
// between two segments of a large body on a loaded host), must not hold
// the lock every request is served under: the body is read before it.
func TestAClientStalledMidBodyDoesNotBlockOtherClients(t *testing.T) {
	ctx := context.Background()
	e, client := startOwnMoto(t)
	stalled, err := net.Dial("tcp", strings.TrimPrefix(e.Endpoint(), "http://"))
	require.NoError(t, err)
	defer stalled.Close()
	body := `{"TableName":"t","Key":{"pk":{"S":"k"}}}`
	_, err = stalled.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n" +
		"X-Amz-Target: DynamoDB_20120810.GetItem\r\n" +
		"Authorization: AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body[:5])) // the rest never comes
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the engine has the headers and is reading the body

	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = client.ListTables(callCtx, &dynamodb.ListTablesInput{})
	assert.NoError(t, err, "a request behind a connection stalled mid-body is answered")
}

// The engine keeps at most --stream-max-records stream records per table:
// the oldest are dropped, sequence numbers go on, and an iterator handed
// out before the drop reads on from the oldest record kept.
func TestStreamKeepsAtMostTheConfiguredNumberOfRecords(t *testing.T) {
	ctx := context.Background()
	e, err := StartMoto(ctx, "--stream-max-records", "5")
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop() })
	db, err := e.Client(ctx)
	require.NoError(t, err)
	streams, err := e.StreamsClient(ctx)
	require.NoError(t, err)
	in := minimalTable("stream-bounded")
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	_, err = db.CreateTable(ctx, in)
	require.NoError(t, err)
	arn := getStreamARN(t, db, aws.ToString(in.TableName))
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	require.NoError(t, err)
	early, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
		ShardId: sd.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	require.NoError(t, err)

	for i := range 8 {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: in.TableName,
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(i)}}})
		require.NoError(t, err)
	}
	horizon, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
		ShardId: sd.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	require.NoError(t, err)
	for name, it := range map[string]*string{"new iterator": horizon.ShardIterator, "iterator from before the drop": early.ShardIterator} {
		out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		require.NoError(t, err, name)
		var keys []string
		var last int
		for _, r := range out.Records {
			keys = append(keys, r.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS).Value)
			seq, err := strconv.Atoi(aws.ToString(r.Dynamodb.SequenceNumber)[10:])
			require.NoError(t, err)
			assert.Greater(t, seq, last, name)
			last = seq
		}
		assert.Equal(t, []string{"k3", "k4", "k5", "k6", "k7"}, keys, name)
	}
}

func getStreamARN(t *testing.T, db *dynamodb.Client, table string) string {
	t.Helper()
	desc, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	return aws.ToString(desc.Table.LatestStreamArn)
}

// The launcher's Python patches have their own unit tests (a clock the test
// moves: 24-hour retention, iterator expiry); `make test` runs them here.
func TestEnginePatchesPassTheirUnitTests(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, venvPython), "-m", "unittest", "discover",
		"-s", filepath.Join(root, "infra", "engine"), "-p", "test_*.py")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "OK")
}
