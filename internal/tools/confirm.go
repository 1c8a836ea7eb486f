package tools

import (
	"context"
	"errors"

	"github.com/intentgate/intentgate/internal/operation"
)

// ErrNotConfirmed is what a family's Confirm (or Verify) error wraps when
// the authoritative read shows no such effect, or one that is not the
// operation's intended effect: a refusal, not a failure to ask.
var ErrNotConfirmed = errors.New("effect not confirmed by the authoritative read")

// EffectConfirmer is implemented by a family whose provider can read one
// effect by id: Confirm returns nil only when the authoritative read shows
// resourceID exists and is op's intended effect (else an error wrapping
// ErrNotConfirmed, or the failure to ask). Families without it are
// checked by their Probe (a lookup by request key or by intended effect).
type EffectConfirmer interface {
	Confirm(ctx context.Context, op operation.Operation, resourceID string) error
}
