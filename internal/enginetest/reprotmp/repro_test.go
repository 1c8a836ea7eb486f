package reprotmp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/intentgate/intentgate/internal/enginetest"
)

type conn struct {
	net.Conn
	sawEOF atomic.Bool
	mu     sync.Mutex
	closed bool
	log    func(string)
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err == io.EOF {
		c.sawEOF.Store(true)
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.log(fmt.Sprintf("%s write %d -> %d %v", c.Conn.LocalAddr(), len(p), n, err))
	return n, err
}

func (c *conn) Close() error {
	if !c.sawEOF.Load() {
		c.log(c.Conn.LocalAddr().String() + " close before EOF")
	}
	return c.Conn.Close()
}

func TestRepro(t *testing.T) {
	ctx := context.Background()
	e, err := enginetest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	var logs []string
	var mu sync.Mutex
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, nw, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, nw, addr)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: c, log: func(s string) { mu.Lock(); logs = append(logs, s); mu.Unlock() }}, nil
	}}}
	c, _ := e.Client(ctx)
	opt := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1; o.HTTPClient = hc }
	fails := 0
	re := regexp.MustCompile(`read tcp (127\.0\.0\.1:\d+)->`)
	note := func(err error) {
		if m := re.FindStringSubmatch(err.Error()); m != nil {
			mu.Lock()
			var mine []string
			for _, l := range logs {
				if strings.HasPrefix(l, m[1]+" ") {
					mine = append(mine, l)
				}
			}
			mu.Unlock()
			if len(mine) > 5 {
				mine = mine[len(mine)-5:]
			}
			t.Logf("FAILED %s: %q", m[1], mine)
		}
	}
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("t%d", i)
		_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema:           []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		}, opt)
		if err != nil {
			fails++
			t.Logf("%d: %v", i, err)
		}
		for j := 0; j < 5; j++ {
			_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(j)}}}, opt)
			if err != nil {
				fails++
				t.Logf("%d put: %v", i, err)
				note(err)
			}
			_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(j)}}}, opt)
			if err != nil {
				fails++
				t.Logf("%d get: %v", i, err)
				note(err)
			}
		}
		c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}, opt)
	}
	t.Logf("fails %d, early closes %d", fails, len(logs))

}
