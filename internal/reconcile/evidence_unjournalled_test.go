package reconcile_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// refusesEvidence answers every write that journals dispatch evidence
// with a store error (nothing applied), as an outage would; every other
// request reaches the engine.
type refusesEvidence struct{ next dynamodb.HTTPClient }

func (c refusesEvidence) Do(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body.Close()
	if strings.Contains(string(body), string(operation.EventEvidenceRecorded)) {
		const refusal = `{"__type":"com.amazon.coral.validate#ValidationException","message":"refused by the test"}`
		return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: io.NopCloser(strings.NewReader(refusal)),
			ContentLength: int64(len(refusal)), Request: req}, nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return c.next.Do(req)
}

// A reconciler's claimed re-send creates and verifies a ticket, but its
// lease ran out meanwhile and the evidence cannot be journalled (the store
// refuses it). The verified id must not vanish: the reconciliation fails
// with it, so the sweep logs it and the operator can find it, rather than
// reporting a lost race and nothing else.
func TestAClaimedResendsVerifiedEffectThatCannotBeJournalledIsReportedNotSwallowed(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	ctx := context.Background()
	op := f.storedTicketOp(t, 10*time.Second)
	now := f.at(f.dispatcher)()
	f.journal(t, op.Handle, operation.Event{Type: operation.EventNotDispatched, At: now, NextAt: now, Detail: "connection refused"})

	db, err := engine.Client(ctx)
	require.NoError(t, err)
	refusing, err := store.New(dynamodb.New(db.Options(), func(o *dynamodb.Options) { o.HTTPClient = refusesEvidence{next: o.HTTPClient} }),
		store.Config{Table: f.st.Table()})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: refusing, Clock: f.at(f.reconciler),
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: time.Second, Reserve: 100 * time.Millisecond}})
	require.NoError(t, err)
	lose := &leaseLoser{ReleaseAPI: f.client, lose: func() {
		// The claimed dispatch stalls past its lease; another reconciler
		// expires it.
		f.base.Advance(time.Minute)
		res, err := f.recon.Reconcile(ctx, f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, operation.EventDispatcherLost, res.Event)
	}}
	slow := release.New(lose, nil, release.RecoveryForLag(time.Second))
	recon, err := reconcile.New(reconcile.Config{Executor: ex, Families: map[string]tools.WriteTool{release.ToolCreate: slow},
		Operator: operator, Jitter: identity, Auditor: obs.NewAuditor(&auditLog{})})
	require.NoError(t, err)

	res, err := recon.Reconcile(ctx, f.get(t, op.Handle))
	assert.Equal(t, reconcile.ClaimWon, res.ClaimResult)
	require.Error(t, err, "a verified effect that could not be journalled is a failure to report")
	assert.Contains(t, err.Error(), "ticket-9001")
	assert.Equal(t, 1, f.tickets())
}
