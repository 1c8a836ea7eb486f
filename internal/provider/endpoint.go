package provider

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// MaxResponseBytes bounds what a client reads from one response.
const MaxResponseBytes = 1 << 20

// ClientConfig is what configures a provider client; RiskConfig and
// ReleaseConfig are this type under their own names.
type ClientConfig struct {
	// BaseURL is the provider's root, e.g. http://127.0.0.1:8081.
	BaseURL string
	// APIKey is this service's own key, sent as X-Api-Key.
	APIKey string
	// MaxConns caps connections, and so concurrent calls, to the provider
	// (Transport.MaxConnsPerHost). Required unless HTTPClient is set, in
	// which case it must be 0 and the caller's transport owns the cap.
	MaxConns int
	// Timeout bounds each call; the effective deadline is the earlier of
	// this and the context's.
	Timeout time.Duration
	// SettleWindow is how long after a call's Timeout the provider may
	// still be working on it (the family's settle window). A sent request
	// whose caller gave up keeps its connection, and so its place under
	// MaxConns, until the provider answers, for at most Timeout plus this.
	SettleWindow time.Duration
	// HTTPClient replaces the default client (e.g. an X-Ray instrumented
	// one). It is copied; redirects and cookies are disabled on the copy.
	HTTPClient *http.Client
	// WrapTransport wraps the client's own MaxConns-capped transport, e.g.
	// xray.RoundTripper; the cap still applies. Not with HTTPClient.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// endpoint is one downstream provider: where it is, how we authenticate,
// and the HTTP client that carries the calls.
type endpoint struct {
	base    *url.URL
	apiKey  string
	timeout time.Duration
	// held bounds a sent request whose caller gave up (do).
	held   time.Duration
	client *http.Client
}

func newEndpoint(name string, cfg ClientConfig) (*endpoint, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("%s: parse BaseURL: %w", name, err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%s: BaseURL %q must be an absolute http(s) URL", name, cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("%s: APIKey is required", name)
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("%s: Timeout must be positive: it bounds every call", name)
	}
	if cfg.SettleWindow < 0 {
		return nil, fmt.Errorf("%s: SettleWindow must not be negative", name)
	}
	var client *http.Client
	switch {
	case cfg.HTTPClient != nil && cfg.WrapTransport != nil:
		return nil, errors.New(name + ": set HTTPClient or WrapTransport, not both")
	case cfg.HTTPClient != nil && cfg.MaxConns != 0:
		return nil, errors.New(name + ": MaxConns applies only to the client's own transport; set it on HTTPClient's transport instead")
	case cfg.HTTPClient != nil:
		copied := *cfg.HTTPClient
		client = &copied
	case cfg.MaxConns <= 0:
		return nil, fmt.Errorf("%s: MaxConns must be positive: the downstream's safe concurrency is the boundary", name)
	default:
		var rt http.RoundTripper = newTransport(cfg.MaxConns)
		if cfg.WrapTransport != nil {
			rt = cfg.WrapTransport(rt)
		}
		client = &http.Client{Transport: rt}
	}
	// Our own copy: no cookies (nothing of anyone's session travels) and no
	// redirects (a 3xx is not an answer we can classify as an effect).
	client.Jar = nil
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &endpoint{base: base, apiKey: cfg.APIKey, timeout: cfg.Timeout, held: cfg.Timeout + cfg.SettleWindow, client: client}, nil
}

// newTransport is HTTP/1.1 only, so that MaxConnsPerHost caps concurrent
// calls (HTTP/2 would multiplex many calls over each connection).
func newTransport(maxConns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = maxConns
	t.MaxIdleConnsPerHost = maxConns
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return t
}

// url joins path segments (escaped) onto the base URL.
func (e *endpoint) url(query url.Values, segments ...string) *url.URL {
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	u := e.base.JoinPath(escaped...)
	u.RawQuery = query.Encode()
	return u
}
