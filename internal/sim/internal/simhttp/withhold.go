package simhttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Hold blocks until the client goes away (the request context ends) or the
// limit passes, whichever is first. It reports whether the client left.
// This is how a simulated provider "times out": it simply never answers.
func Hold(ctx context.Context, limit time.Duration) (clientGone bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-timer.C:
		return false
	}
}

// Pause waits d without regard to the client: a slow provider keeps working
// (and may commit) after its caller has given up.
func Pause(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

// DropConnection hijacks the connection and closes it without writing a
// response. With linger 0 the peer gets a reset rather than a clean FIN,
// which is what a crashed proxy or a dropped route looks like.
func DropConnection(w http.ResponseWriter) error {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("hijack connection: %w", err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("close hijacked connection: %w", err)
	}
	return nil
}
