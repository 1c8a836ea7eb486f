package release

import (
	"context"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// Confirm reads ticketID authoritatively and checks it is op's intended
// effect (ErrNotConfirmed when it does not exist or is for another
// target). An operator's SUCCEEDED resolution is checked with it.
func (f *Family) Confirm(ctx context.Context, op operation.Operation, ticketID string) error {
	_, err := f.confirm(ctx, op, ticketID)
	return err
}

var _ tools.EffectConfirmer = (*Family)(nil)
