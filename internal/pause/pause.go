// Package pause waits for a duration unless the context ends first: the
// one wait that backoffs and pacing loops share (store conflict backoff,
// reconciler and stream poller pacing).
package pause

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends; then it returns ctx.Err(). A d of zero
// or less returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
