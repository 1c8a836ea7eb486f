package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

// A resolution's audit record says who resolved, what was decided (the
// event, the resource) and why (the evidence and the operator's
// statements): the operation item's journal expires with the item.
func TestAResolutionIsAuditedWithWhatAndWhy(t *testing.T) {
	w := newVisibilityWorld(t)
	op := w.escalatedRefund(t)
	oscar := auth.Subject{ClientID: "ops-console", UserID: "oscar", MerchantID: "ops", Roles: []string{"operator"}}
	evidence := "refund re_1 in the ledger (INC-42)"
	res := call(t, w.as(t, oscar), "resolve_operation", map[string]any{"handle": op.Handle, "resolution": "SUCCEEDED",
		"evidence": evidence, "resource_id": "re_1"})
	require.False(t, res.IsError, answer(t, res))

	var rec map[string]any
	for _, r := range auditRecords(t, w.audit) {
		if r["tool"] == "resolve_operation" {
			rec = r
		}
	}
	require.NotNil(t, rec)
	assert.Equal(t, "oscar", rec["end_user_principal"], "who: present")
	assert.Equal(t, "operator_resolved_succeeded", rec["event"], "what: the resolution is not in the call's audit record: %v", rec)
	assert.Contains(t, string(mustJSON(t, rec)), evidence, "why: the evidence is not audited")
	assert.Equal(t, "re_1", rec["resource_id"])

}
