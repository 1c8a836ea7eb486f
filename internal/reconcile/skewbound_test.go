package reconcile_test

import (
	"time"

	"github.com/intentgate/intentgate/internal/tools"
)

// withSkewBound configures the executor's clock skew bound.
func withSkewBound(cfg *tools.ExecutorConfig, d time.Duration) { cfg.ClockSkewBound = d }
