package operation

// Owner is what a visibility decision needs to know about an operation:
// whose it is and which resource it acts on. It is read on its own (a
// projection) so that an operation the caller may not see is never read
// whole: refusing it costs what an operation that does not exist costs.
type Owner struct {
	Handle    string
	Tool      string
	ClientID  string
	EndUserID string
	TenantID  string            // merchant or team the end user acted for
	Target    map[string]string // the resource: order_id; service/commit/environment
}

// Owner is op's owner part.
func (op Operation) Owner() Owner {
	return Owner{Handle: op.Handle, Tool: op.Key.Tool, ClientID: op.Key.ClientID,
		EndUserID: op.EndUserID, TenantID: op.TenantID, Target: op.Target}
}
