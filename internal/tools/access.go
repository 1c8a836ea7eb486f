package tools

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// RoleOperator may read and resolve any operation.
const RoleOperator = "operator"

// GrantCoverage is implemented by a write tool family whose grants let a
// caller see operations on a resource beyond the caller's own: a team
// granted a service sees that service's tickets; a merchant sees the
// reviews of the orders it owns.
type GrantCoverage interface {
	Covers(caller Caller, owner operation.Owner) bool
}

// Visibility is the one rule deciding which operations a caller may see,
// used for every tool's answer (a write's result, including a deduplicated
// one; get_operation; the status tools; approve and resolve; the review
// packet). A caller sees an operation when
//   - the caller is an operator, or
//   - the caller's tenant and subject are the operation's (both, so a token
//     with the same sub but another merchant sees nothing), or
//   - a grant of the operation's family covers the resource for the caller.
//
// Everything else is answered exactly like an operation that does not
// exist (NotVisible), at the same cost in store reads.
type Visibility struct {
	tools  []string
	grants map[string]GrantCoverage
}

// NewVisibility builds the rule for the given write tool families; those
// implementing GrantCoverage contribute their grants.
func NewVisibility(families ...WriteTool) Visibility {
	v := Visibility{grants: map[string]GrantCoverage{}}
	for _, f := range families {
		v.tools = append(v.tools, f.Name())
		if g, ok := f.(GrantCoverage); ok {
			v.grants[f.Name()] = g
		}
	}
	return v
}

// CanSee applies the rule to an operation's owner.
func (v Visibility) CanSee(caller Caller, owner operation.Owner) bool {
	switch {
	case caller.HasRole(RoleOperator):
		return true
	case caller.UserID == "":
		return false
	case Owns(caller, owner):
		return true
	}
	g, ok := v.grants[owner.Tool]
	return ok && g.Covers(caller, owner)
}

// Owns reports whether the operation is caller's own: the caller's tenant
// and subject are the operation's (both, so the same sub under another
// merchant or team owns nothing). A token without a tenant claim is its
// own (empty) tenant: it owns what it created, never another tenant's
// operations. Seeing an operation through a grant is not owning it: only
// its owner (or an operator) may withdraw it.
func Owns(caller Caller, owner operation.Owner) bool {
	return caller.UserID != "" && owner.TenantID == caller.TenantID && owner.EndUserID == caller.UserID
}

// NotVisibleMessage is the one answer for an operation that does not
// exist, that the caller may not see, or that is of another kind than the
// tool reads.
const NotVisibleMessage = "no such operation is visible to you"

// NotVisible is the refusal for an operation the caller cannot see.
func NotVisible() *Failure { return Fail(CodeNotFound, false, nil, NotVisibleMessage) }

// Ref names an operation the way a caller may: by the operation_id it chose
// (scoped to its own client), or by the public handle. Tool, when set,
// restricts the answer to operations of that write tool (a status tool
// reads only its own family).
type Ref struct {
	OperationID string
	Handle      string
	Tool        string
}

// Find reads the operation ref names if the caller may see it, and
// otherwise answers NotVisible. Every candidate handle is looked at with a
// projected read of its owner only (never the whole item), and always all
// of them, so an unknown key and a foreign one cost the same store reads
// and get the same answer; only a visible operation is then read whole.
func (e *Executor) Find(ctx context.Context, v Visibility, caller Caller, ref Ref) (operation.Operation, error) {
	handles, err := v.candidates(caller, ref)
	if err != nil {
		return operation.Operation{}, err
	}
	var found []string
	var foundTools []string
	for _, h := range handles {
		owner, err := e.getOwner(ctx, h)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return operation.Operation{}, storeUnavailable(err)
		}
		if (ref.Tool == "" || owner.Tool == ref.Tool) && v.CanSee(caller, owner) {
			found, foundTools = append(found, h), append(foundTools, owner.Tool)
		}
	}
	switch {
	case len(found) == 0:
		return operation.Operation{}, NotVisible()
	case len(found) > 1:
		// An operation_id is scoped by tool, so one caller may have used it
		// with several write tools: answering with the first would show one
		// write's state for another's. The handles are the caller's own
		// operations', each visible to it.
		named := make([]string, len(found))
		for i := range found {
			named[i] = foundTools[i] + ": " + found[i]
		}
		return operation.Operation{}, Fail(CodeInvalidArgument, false, nil,
			"operation_id %q names %d operations, one per write tool it was used with (%s); ask by the handle of the one you mean",
			ref.OperationID, len(found), strings.Join(named, ", "))
	}
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	defer cancel()
	op, err := e.cfg.Store.Get(sctx, found[0])
	switch {
	case errors.Is(err, store.ErrNotFound):
		return operation.Operation{}, NotVisible()
	case err != nil:
		return operation.Operation{}, storeUnavailable(err)
	}
	return op, nil
}

// getOwner is one projected read under its own store budget (each store
// call gets the budget's store stage, as every other store call does).
func (e *Executor) getOwner(ctx context.Context, handle string) (operation.Owner, error) {
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	defer cancel()
	return e.cfg.Store.GetOwner(sctx, handle)
}

// candidates are the handles ref may name for caller: the handle itself,
// or the caller's operation_id scoped by each write tool (or by ref.Tool).
func (v Visibility) candidates(caller Caller, ref Ref) ([]string, error) {
	if ref.OperationID == "" {
		if err := operation.ValidateHandle(ref.Handle); err != nil {
			return nil, Fail(CodeInvalidArgument, false, nil, "%v", err)
		}
		return []string{ref.Handle}, nil
	}
	if err := operation.ValidateOperationID(ref.OperationID); err != nil {
		return nil, Fail(CodeInvalidArgument, false, nil, "%v", err)
	}
	names := v.tools
	if ref.Tool != "" && slices.Contains(names, ref.Tool) {
		names = []string{ref.Tool}
	}
	handles := make([]string, 0, len(names))
	for _, name := range names {
		key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, caller.UserID, name, ref.OperationID)
		if err != nil {
			return nil, Fail(CodeInvalidArgument, false, nil, "%v", err)
		}
		handles = append(handles, key.Handle())
	}
	return handles, nil
}

func storeUnavailable(err error) *Failure {
	f := Fail(CodeTemporaryUnavailable, true, nil, "the operation store is unavailable; retry shortly")
	f.Cause = err
	return f
}
