package enginetest

import (
	"context"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/localengine"
)

func TestTableNameIsValidAndUnique(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	a, b := TableName(t), TableName(t)
	assert.NotEqual(t, a, b)
	assert.Regexp(t, valid, a)

	t.Run("a very long subtest name with spaces/slashes and ünïcode that goes on and on", func(t *testing.T) {
		name := TableName(t)
		assert.Regexp(t, valid, name)
		assert.LessOrEqual(t, len(name), 3+maxNameFromTest+1+8)
	})
}

func TestNewStoreGivesAFreshTableDroppedAtCleanup(t *testing.T) {
	ctx := context.Background()
	e, client := startOwnMoto(t)

	var a, b string
	t.Run("two stores", func(t *testing.T) {
		a, b = e.NewStore(t).Table(), e.NewStore(t).Table()
		assert.NotEqual(t, a, b)
		out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{a, b}, out.TableNames, "both tables exist and are active")
		ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &a})
		require.NoError(t, err)
		assert.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus, "EnsureTable ran")
	})
	out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	assert.Empty(t, out.TableNames, "the subtest's cleanup deleted both tables")
}

// startOwnMoto starts a moto engine for this test alone, whatever engine
// the environment names, so the test sees every table on it; stopped at
// cleanup.
func startOwnMoto(t *testing.T) (*Engine, *dynamodb.Client) {
	t.Helper()
	t.Setenv(localengine.EnvEndpoint, "")
	t.Setenv(localengine.EnvKind, "")
	started, err := localengine.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = started.Stop() })
	client, err := started.Client(context.Background())
	require.NoError(t, err)
	return &Engine{Engine: started}, client
}
