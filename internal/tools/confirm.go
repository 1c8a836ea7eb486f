package tools

import (
	"context"

	"github.com/intentgate/intentgate/internal/operation"
)

// EffectConfirmer is implemented by a family whose provider can read one
// effect by id: Confirm returns nil only when the authoritative read shows
// resourceID exists and is op's intended effect. Families without it are
// checked by their Probe (a lookup by request key or by intended effect).
type EffectConfirmer interface {
	Confirm(ctx context.Context, op operation.Operation, resourceID string) error
}
