package lambdahttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/intentgate/intentgate/internal/requestid"
)

// minShutdownGrace is how long plain-HTTP mode waits for in-flight requests
// at shutdown when LocalTimeout is shorter.
const minShutdownGrace = 10 * time.Second

// UnderLambda reports whether the process runs inside the Lambda runtime,
// which always sets AWS_LAMBDA_RUNTIME_API (the Runtime Interface Emulator
// and sam local included).
func UnderLambda() bool {
	return os.Getenv("AWS_LAMBDA_RUNTIME_API") != ""
}

// Serve runs h the way the environment asks: under Lambda it starts the
// runtime loop with Handler(h, opts) and does not return; otherwise it
// serves plain HTTP on addr (same binary, e.g. the devstack) until SIGINT or
// SIGTERM, then shuts down gracefully and returns.
func Serve(h http.Handler, opts Options, addr string) error {
	if UnderLambda() {
		lambda.Start(Handler(h, opts))
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, h, opts)
}

// ServeListener serves LocalHandler(h, opts) on ln until ctx is done, then
// stops accepting and waits for in-flight requests (bounded) before
// returning. It closes ln.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler, opts Options) error {
	srv := &http.Server{
		Handler:           LocalHandler(h, opts),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(opts.logger().Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	grace := max(opts.LocalTimeout, minShutdownGrace)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down http server on %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	}
	return nil
}

// LocalHandler gives plain-HTTP requests what Handler gives Lambda ones: a
// server-minted request id (requestid.From, and X-Request-Id when the caller
// sent none) and, when LocalTimeout is set, a deadline. JWT claims are never
// taken here: without API Gateway the server verifies the bearer itself.
func LocalHandler(h http.Handler, opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestid.New()
		ctx := requestid.With(r.Context(), requestid.IDs{Request: id})
		if opts.LocalTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, opts.LocalTimeout)
			defer cancel()
			// The body is read under the same deadline: a client that sends
			// its headers and withholds the body would otherwise hold the
			// request and its connection for as long as it likes (under
			// Lambda, API Gateway has the whole body before the invoke).
			// Not every connection supports it (HTTP/2): the context's
			// deadline then still ends the work.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(opts.LocalTimeout))
		}
		r = r.WithContext(ctx)
		if r.Header.Get(requestid.Header) == "" {
			r.Header.Set(requestid.Header, id)
		}
		h.ServeHTTP(w, r)
	})
}
