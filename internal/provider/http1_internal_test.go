package provider

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MaxConns caps concurrent calls only over HTTP/1.1: HTTP/2 would carry
// every call over one connection, and its transport replays requests on
// its own (GOAWAY, refused streams). So the client never negotiates h2,
// even with a provider that offers it.
func TestCallsToAProviderOfferingHTTP2StayOnHTTP1(t *testing.T) {
	protos := make(chan int, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.ProtoMajor
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"order_id":"O1","merchant_id":"M1"}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	require.Contains(t, srv.TLS.NextProtos, "h2", "the provider offers HTTP/2")
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	c, err := NewRiskClient(RiskConfig{BaseURL: srv.URL, APIKey: "k", MaxConns: 1, Timeout: time.Second,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			rt.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
			return rt
		}})
	require.NoError(t, err)
	_, err = c.GetOrder(context.Background(), "O1")
	require.NoError(t, err)
	assert.Equal(t, 1, <-protos)
}
