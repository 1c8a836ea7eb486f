package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// keyLookupFamily answers its probe as tools.ProbeResult documents for a
// provider that deduplicates by our request key: an authoritative lookup
// whose zero "also covers every create of this operation that could still
// commit late" (LateCommitsBounded), and which is not a search, so its
// IndexedThrough is zero ("Zero when the answer is not a search").
type keyLookupFamily struct{ *release.Family }

func (k keyLookupFamily) Probe(ctx context.Context, op operation.Operation) (tools.ProbeResult, error) {
	return tools.ProbeResult{Source: "key_lookup", Authoritative: true, LateCommitsBounded: true, Detail: "lookup by request key"}, nil
}

// Recovery: the provider deduplicates creates by our request key.
func (k keyLookupFamily) Recovery() tools.Recovery {
	rec := k.Family.Recovery()
	rec.IdempotentCreate = true
	return rec
}

// The wait for the grace compares a search's watermark with the horizon
// plus the grace. A bounded answer that is not a search (a provider that
// deduplicates by our request key) has none: FAILED must not be refused
// for ever, "resolve again after" an instant long gone.
func TestAFailedResolutionOnABoundedKeyLookupIsNotRefusedForever(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	op := f.escalateAfterAResendThatBreaksItsPromise(t, 0)
	f.base.Advance(24 * time.Hour) // long past the horizon and every grace

	_, err := operatortools.Resolve(context.Background(), f.disp, keyLookupFamily{f.fam}, olga, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "provider lookup by request key shows nothing"})
	require.NoError(t, err, "a day after the horizon, an authoritative bounded absence still cannot be resolved FAILED")
}
