package tools

import (
	"context"
	"errors"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
)

// RoleOperator may read and resolve any operation.
const RoleOperator = "operator"

// Visible is object-level access to an operation: the same end user, the
// same tenant (merchant, team), or an operator. Everyone else is told
// NOT_FOUND, so a handle reveals nothing about operations one may not see.
func Visible(caller Caller, op operation.Operation) bool {
	switch {
	case caller.HasRole(RoleOperator):
		return true
	case op.EndUserID != "" && op.EndUserID == caller.UserID:
		return true
	case op.TenantID != "" && op.TenantID == caller.TenantID:
		return true
	}
	return false
}

// FindByHandle reads the operation behind a public handle if the caller
// may see it.
func (e *Executor) FindByHandle(ctx context.Context, caller Caller, handle string) (operation.Operation, error) {
	if err := operation.ValidateHandle(handle); err != nil {
		return operation.Operation{}, Fail(CodeInvalidArgument, false, nil, "%v", err)
	}
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	defer cancel()
	op, err := e.cfg.Store.Get(sctx, handle)
	return e.visibleOrFail(caller, op, err)
}

// FindByOperationID reads the caller's own operation by the operation_id it
// chose, trying each write tool's scope (keys are scoped by client and tool).
func (e *Executor) FindByOperationID(ctx context.Context, caller Caller, operationID string, toolNames []string) (operation.Operation, error) {
	if err := operation.ValidateOperationID(operationID); err != nil {
		return operation.Operation{}, Fail(CodeInvalidArgument, false, nil, "%v", err)
	}
	sctx, cancel := e.cfg.Budget.StoreContext(ctx)
	defer cancel()
	for _, name := range toolNames {
		key, err := operation.NewRequestKey(caller.ClientID, caller.TenantID, name, operationID)
		if err != nil {
			return operation.Operation{}, Fail(CodeInvalidArgument, false, nil, "%v", err)
		}
		op, err := e.cfg.Store.Get(sctx, key.Handle())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		return e.visibleOrFail(caller, op, err)
	}
	return operation.Operation{}, Fail(CodeNotFound, false, nil, "no operation %q for this client", operationID)
}

func (e *Executor) visibleOrFail(caller Caller, op operation.Operation, err error) (operation.Operation, error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return operation.Operation{}, Fail(CodeNotFound, false, nil, "no such operation")
	case err != nil:
		f := Fail(CodeTemporaryUnavailable, true, nil, "the operation store is unavailable; retry shortly")
		f.Cause = err
		return operation.Operation{}, f
	case !Visible(caller, op):
		return operation.Operation{}, Fail(CodeNotFound, false, nil, "no such operation")
	}
	return op, nil
}
