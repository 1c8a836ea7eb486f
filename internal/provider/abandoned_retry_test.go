package provider_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
)

// A read the transport retries on a fresh connection (the server closed
// the reused keep-alive connection it was written on) is, while it waits
// for a connection, a request not yet written. When its caller gives up
// then, it must be stopped like any unwritten request, not left queued to
// reach the provider after the caller has been answered.
func TestARetriedReadStillWaitingForAConnectionIsStoppedWhenItsCallerGivesUp(t *testing.T) {
	var (
		mu          sync.Mutex
		answeredAt  time.Time // when the stale read's caller was answered
		lateArrival atomic.Int32
		staleSeen   atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/orders/STALE":
			if staleSeen.Add(1) == 1 {
				// The keep-alive race: the server drops the reused
				// connection without answering, after the next caller
				// has queued for the only connection.
				time.Sleep(60 * time.Millisecond)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			mu.Lock()
			if !answeredAt.IsZero() && time.Now().After(answeredAt) {
				lateArrival.Add(1)
			}
			mu.Unlock()
		case "/orders/SLOW":
			time.Sleep(400 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not_found"}`))
	}))
	t.Cleanup(srv.Close)
	c, err := provider.NewRiskClient(provider.RiskConfig{BaseURL: srv.URL, APIKey: apiKey, MaxConns: 1,
		Timeout: 3 * time.Second, SettleWindow: time.Second})
	require.NoError(t, err)

	_, err = c.GetOrder(context.Background(), "WARM") // leaves one idle keep-alive connection
	require.Error(t, err)

	staleDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.GetOrder(ctx, "STALE")
		mu.Lock()
		answeredAt = time.Now()
		mu.Unlock()
		staleDone <- err
	}()
	time.Sleep(20 * time.Millisecond)
	slowDone := make(chan error, 1)
	go func() {
		_, err := c.GetOrder(context.Background(), "SLOW") // queued for the connection first
		slowDone <- err
	}()

	require.Error(t, <-staleDone, "the stale read's caller gave up")
	require.Error(t, <-slowDone)
	time.Sleep(300 * time.Millisecond) // room for a left-over retry to be sent
	assert.Zero(t, lateArrival.Load(),
		"a retry that had not been written when its caller gave up reached the provider afterwards (%d attempts seen)", staleSeen.Load())
}
