package chaos

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// engineMeter counts the requests a campaign sends its engines and their
// wall time, by API action and by who sent them: the profile of where the
// engines' time goes (docs/chaos.md, "Throughput").
type engineMeter struct {
	mu sync.Mutex
	by map[string]*meterCount
}

type meterCount struct {
	n     int
	total time.Duration
}

func newEngineMeter() *engineMeter { return &engineMeter{by: map[string]*meterCount{}} }

// wrap measures next under the name role ("replica", "reconciler",
// "stream", "campaign").
func (m *engineMeter) wrap(role string, next dynamodb.HTTPClient) dynamodb.HTTPClient {
	return meteredClient{m: m, role: role, next: next}
}

type meteredClient struct {
	m    *engineMeter
	role string
	next dynamodb.HTTPClient
}

func (c meteredClient) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	action := target[strings.LastIndex(target, ".")+1:]
	start := time.Now()
	resp, err := c.next.Do(req)
	c.m.add(c.role+" "+action, time.Since(start))
	return resp, err
}

func (m *engineMeter) add(key string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc := m.by[key]
	if mc == nil {
		mc = &meterCount{}
		m.by[key] = mc
	}
	mc.n++
	mc.total += d
}

// EngineLoad is one line of the profile.
type EngineLoad struct {
	Requests int
	Total    time.Duration
}

func (m *engineMeter) snapshot() map[string]EngineLoad {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]EngineLoad, len(m.by))
	for k, v := range m.by {
		out[k] = EngineLoad{Requests: v.n, Total: v.total}
	}
	return out
}
