package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/provider/providertest"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
)

var review = provider.CreateReviewInput{OrderID: "O20260728001", Reason: "chargeback pattern", ReviewType: "fraud"}

func TestCreateReviewClassification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		faults    riskapi.Faults
		order     string
		timeout   time.Duration
		class     provider.Class
		status    int
		code      string
		committed int
	}{
		{name: "201 created", class: provider.ClassNone, committed: 1},
		{name: "422 reject is a proven failure", faults: riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateReject, Times: 1}}},
			class: provider.ClassRejected, status: 422, code: "rejected"},
		{name: "404 unknown order is a proven failure", order: "O00000000000",
			class: provider.ClassRejected, status: 404, code: "order_not_found"},
		{name: "500 before commit is unknown", faults: riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateError500BeforeCommit, Times: 1}}},
			class: provider.ClassUnknown, status: 500, code: "internal"},
		{name: "500 after commit is unknown", faults: riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateError500AfterCommit, Times: 1}}},
			class: provider.ClassUnknown, status: 500, code: "internal", committed: 1},
		{name: "dropped response is unknown", faults: riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}},
			class: provider.ClassUnknown, committed: 1},
		{name: "client timeout is unknown", faults: riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}},
			timeout: 100 * time.Millisecond, class: provider.ClassUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, url := startRisk(t)
			require.NoError(t, sim.SetFaults(tc.faults))
			timeout := tc.timeout
			if timeout == 0 {
				timeout = time.Second
			}
			in := review
			if tc.order != "" {
				in.OrderID = tc.order
			}
			got, err := riskClient(t, url, 2, timeout).CreateReview(context.Background(), "op-1", in)
			assert.Equal(t, tc.committed, sim.Stats().ReviewsCommitted)
			if tc.class == provider.ClassNone {
				require.NoError(t, err)
				assert.Equal(t, "op-1", got.RequestKey)
				assert.False(t, got.Replayed)
				return
			}
			perr := providertest.RequireClass(t, tc.class, err)
			assert.Equal(t, provider.OpCreateReview, perr.Op)
			assert.Equal(t, tc.status, perr.StatusCode)
			assert.Equal(t, tc.code, perr.Code)
		})
	}
}

func TestCreateReviewReplayIs200WithTheSameReview(t *testing.T) {
	_, url := startRisk(t)
	c := riskClient(t, url, 2, time.Second)
	first, err := c.CreateReview(context.Background(), "op-1", review)
	require.NoError(t, err)
	replay, err := c.CreateReview(context.Background(), "op-1", review)
	require.NoError(t, err)
	assert.True(t, replay.Replayed)
	first.Replayed = true
	assert.Equal(t, first, replay)
}

func TestConnectionRefusedIsNotDispatched(t *testing.T) {
	url := closedPortURL(t)
	_, err := riskClient(t, url, 2, time.Second).CreateReview(context.Background(), "op-1", review)
	perr := providertest.RequireClass(t, provider.ClassNotDispatched, err)
	assert.Zero(t, perr.StatusCode)

	_, err = releaseClient(t, url, time.Second).CreateTicket(context.Background(), ticket)
	providertest.RequireClass(t, provider.ClassNotDispatched, err)
}

func TestContextAlreadyDoneIsNotDispatched(t *testing.T) {
	sim, url := startRisk(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := riskClient(t, url, 2, time.Second).CreateReview(ctx, "op-1", review)
	perr := providertest.RequireClass(t, provider.ClassNotDispatched, err)
	assert.ErrorIs(t, perr, context.Canceled)
	assert.Zero(t, sim.Stats().CreateCalls)
}

func TestWaitingForAConnectionSlotAndTimingOutIsNotDispatched(t *testing.T) {
	sim, url := startRisk(t)
	c := riskClient(t, url, 1, 2*time.Second)
	require.NoError(t, sim.SetFaults(riskapi.Faults{Lookup: []riskapi.LookupFault{{Mode: riskapi.LookupTimeout, Times: 1}}}))

	// Occupy the only connection with a lookup the simulator holds.
	holder, release := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		_, _, err := c.FindReviewByRequestKey(holder, "op-held")
		held <- err
	}()
	require.Eventually(t, func() bool { return sim.Stats().LookupCalls == 1 }, 2*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CreateReview(ctx, "op-queued", review)
	providertest.RequireClass(t, provider.ClassNotDispatched, err)
	assert.Zero(t, sim.Stats().CreateCalls, "the queued create never reached the provider")

	release()
	providertest.RequireClass(t, provider.ClassUnknown, <-held)
}

func TestDroppedResponseOnAReusedConnectionIsNotReplayed(t *testing.T) {
	// net/http resends a request carrying Idempotency-Key when a kept-alive
	// connection fails; the client must not let it.
	sim, url := startRisk(t)
	c := riskClient(t, url, 1, time.Second)
	_, err := c.CreateReview(context.Background(), "op-warm", review)
	require.NoError(t, err)
	require.NoError(t, sim.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))

	_, err = c.CreateReview(context.Background(), "op-drop", review)
	providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, 2, sim.Stats().CreateCalls, "exactly one send per CreateReview")
}

func TestServerBusyStatusesAreUnknownAndOtherRefusalsRejected(t *testing.T) {
	for status, want := range map[int]provider.Class{
		http.StatusBadRequest:          provider.ClassRejected,
		http.StatusUnauthorized:        provider.ClassRejected,
		http.StatusConflict:            provider.ClassUnknown, // same key still in progress
		http.StatusTooEarly:            provider.ClassUnknown,
		http.StatusUnprocessableEntity: provider.ClassRejected,
		http.StatusRequestTimeout:      provider.ClassUnknown,
		http.StatusTooManyRequests:     provider.ClassUnknown,
		http.StatusBadGateway:          provider.ClassUnknown,
		http.StatusServiceUnavailable:  provider.ClassUnknown,
		http.StatusGatewayTimeout:      provider.ClassUnknown,
		http.StatusNoContent:           provider.ClassUnknown,
		http.StatusTemporaryRedirect:   provider.ClassUnknown,
		http.StatusInternalServerError: provider.ClassUnknown,
	} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			url, _ := fakeProvider(t, status, `{"error":"some_code","message":"m"}`)
			_, err := riskClient(t, url, 2, time.Second).CreateReview(context.Background(), "op-1", review)
			perr := providertest.RequireClass(t, want, err)
			assert.Equal(t, status, perr.StatusCode)
		})
	}
}

func TestSuccessThatDoesNotDescribeTheEffectIsUnknown(t *testing.T) {
	valid := `{"review_id":"rv-1","order_id":"O20260728001","review_type":"fraud","request_key":"op-1","status":"OPEN","created_at":"2026-07-28T10:31:12Z"}`
	for name, tc := range map[string]struct {
		body string
		code string
	}{
		"not json":          {`<html>ok</html>`, provider.CodeUndecodableResponse},
		"truncated":         {valid[:40], provider.CodeUndecodableResponse},
		"trailing data":     {valid + `{}`, provider.CodeUndecodableResponse},
		"missing review id": {strings.Replace(valid, `"rv-1"`, `""`, 1), provider.CodeResponseMismatch},
		"other request key": {strings.Replace(valid, `"op-1"`, `"op-2"`, 1), provider.CodeResponseMismatch},
		"other order":       {strings.Replace(valid, `O20260728001`, `O20260728002`, 1), provider.CodeResponseMismatch},
		"too large":         {`{"pad":"` + strings.Repeat("x", provider.MaxResponseBytes) + `"}`, provider.CodeResponseTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			url, _ := fakeProvider(t, http.StatusCreated, tc.body)
			_, err := riskClient(t, url, 2, time.Second).CreateReview(context.Background(), "op-1", review)
			perr := providertest.RequireClass(t, provider.ClassUnknown, err)
			assert.Equal(t, tc.code, perr.Code)
		})
	}
	t.Run("valid with an extra field", func(t *testing.T) {
		url, _ := fakeProvider(t, http.StatusCreated, strings.Replace(valid, `{`, `{"priority":"high",`, 1))
		got, err := riskClient(t, url, 2, time.Second).CreateReview(context.Background(), "op-1", review)
		require.NoError(t, err)
		assert.Equal(t, "rv-1", got.ReviewID)
	})
}

func TestInvalidInputIsRejectedWithoutDispatch(t *testing.T) {
	sim, url := startRisk(t)
	c := riskClient(t, url, 2, time.Second)
	for name, call := range map[string]func() error{
		"empty key":      func() error { _, err := c.CreateReview(context.Background(), "", review); return err },
		"key with space": func() error { _, err := c.CreateReview(context.Background(), "a b", review); return err },
		"key too long": func() error {
			_, err := c.CreateReview(context.Background(), strings.Repeat("k", 256), review)
			return err
		},
		"no reason": func() error {
			_, err := c.CreateReview(context.Background(), "k", provider.CreateReviewInput{OrderID: "O1", ReviewType: "t"})
			return err
		},
		"lookup no key": func() error { _, _, err := c.FindReviewByRequestKey(context.Background(), ""); return err },
		"order no id":   func() error { _, err := c.GetOrder(context.Background(), " "); return err },
	} {
		t.Run(name, func(t *testing.T) {
			perr := providertest.RequireClass(t, provider.ClassRejected, call())
			assert.Equal(t, provider.CodeInvalidInput, perr.Code)
		})
	}
	stats := sim.Stats()
	assert.Zero(t, stats.CreateCalls+stats.LookupCalls)
}

func TestReadsClassifyNotFound(t *testing.T) {
	_, url := startRisk(t)
	c := riskClient(t, url, 2, time.Second)
	_, err := c.GetOrder(context.Background(), "O00000000000")
	perr := providertest.RequireClass(t, provider.ClassNotFound, err)
	assert.Equal(t, "order_not_found", perr.Code)
	_, err = c.GetReview(context.Background(), "rv-404")
	providertest.RequireClass(t, provider.ClassNotFound, err)

	_, found, err := c.FindReviewByRequestKey(context.Background(), "op-none")
	require.NoError(t, err, "absence by request key is a successful, authoritative answer")
	assert.False(t, found)
}

func TestLookupFailuresAreUnknown(t *testing.T) {
	sim, url := startRisk(t)
	c := riskClient(t, url, 2, 100*time.Millisecond)
	require.NoError(t, sim.SetFaults(riskapi.Faults{Lookup: []riskapi.LookupFault{
		{Mode: riskapi.LookupTimeout, Times: 1}, {Mode: riskapi.LookupError500, Times: 1},
	}}))
	for range 2 {
		_, found, err := c.FindReviewByRequestKey(context.Background(), "op-1")
		providertest.RequireClass(t, provider.ClassUnknown, err)
		assert.False(t, found)
	}
}

func TestLookupWithSeveralMatchesIsAnIncident(t *testing.T) {
	one := `{"review_id":"rv-%d","order_id":"O1","review_type":"fraud","request_key":"op-1","status":"OPEN","created_at":"2026-07-28T10:31:12Z"}`
	url, _ := fakeProvider(t, http.StatusOK, `{"reviews":[`+fmt.Sprintf(one, 1)+`,`+fmt.Sprintf(one, 2)+`]}`)
	_, _, err := riskClient(t, url, 2, time.Second).FindReviewByRequestKey(context.Background(), "op-1")
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, provider.CodeMultipleMatches, perr.Code)
	assert.ErrorIs(t, err, provider.ErrMultipleMatches)
}

func TestLookupWithoutTheReviewsFieldIsUnknown(t *testing.T) {
	url, _ := fakeProvider(t, http.StatusOK, `{}`)
	_, _, err := riskClient(t, url, 2, time.Second).FindReviewByRequestKey(context.Background(), "op-1")
	providertest.RequireClass(t, provider.ClassUnknown, err)
}

func TestClassOf(t *testing.T) {
	assert.Equal(t, provider.ClassNone, provider.ClassOf(nil))
	assert.Equal(t, provider.ClassUnknown, provider.ClassOf(errors.New("anything")))
	wrapped := fmt.Errorf("submit: %w", &provider.Error{Class: provider.ClassRejected, Op: "x"})
	assert.Equal(t, provider.ClassRejected, provider.ClassOf(wrapped))
}

func TestLookupAnsweringWithReviewsOfOtherKeysProvesNoAbsence(t *testing.T) {
	// The lookup is filtered by request_key, so every review in the answer
	// must carry it. Reviews under other keys mean the provider did not
	// apply the filter (a renamed or ignored parameter answers with a page
	// of all reviews): ours may be on another page, so zero matches in it
	// is not the authoritative absence the reconciler would act on.
	other := `{"review_id":"rv-7","order_id":"O1","review_type":"fraud","request_key":"op-other","status":"OPEN","created_at":"2026-07-28T10:31:12Z"}`
	url, _ := fakeProvider(t, http.StatusOK, `{"reviews":[`+other+`],"next_page":"2"}`)
	_, found, err := riskClient(t, url, 2, time.Second).FindReviewByRequestKey(context.Background(), "op-1")
	assert.False(t, found)
	perr := providertest.RequireClass(t, provider.ClassUnknown, err)
	assert.Equal(t, provider.CodeResponseMismatch, perr.Code)
}
