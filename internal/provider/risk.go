package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Risk API operation names, as they appear in Error.Op.
const (
	OpCreateReview           = "risk.create_review"
	OpFindReviewByRequestKey = "risk.find_review_by_request_key"
	OpGetReview              = "risk.get_review"
	OpGetOrder               = "risk.get_order"
)

// RiskConfig configures a RiskClient; see ClientConfig for the fields.
type RiskConfig ClientConfig

// CreateReviewInput is what a review is created from.
type CreateReviewInput struct {
	OrderID    string
	Reason     string
	ReviewType string
}

// Review is a risk review at the Risk API.
type Review struct {
	ReviewID   string
	OrderID    string
	ReviewType string
	RequestKey string
	Status     string
	CreatedAt  time.Time
	// Replayed is true when the Risk API answered 200: the review already
	// existed for this request key and no new one was created.
	Replayed bool
}

// Order is who owns an order, for object-level authorization.
type Order struct {
	OrderID    string
	MerchantID string
}

// RiskClient calls the Risk API. It is safe for concurrent use.
type RiskClient struct {
	endpoint *endpoint
}

// NewRiskClient validates cfg and builds a client.
func NewRiskClient(cfg RiskConfig) (*RiskClient, error) {
	ep, err := newEndpoint("risk client", ClientConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &RiskClient{endpoint: ep}, nil
}

type reviewWire struct {
	ReviewID   string    `json:"review_id"`
	OrderID    string    `json:"order_id"`
	ReviewType string    `json:"review_type"`
	RequestKey string    `json:"request_key"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
}

func (w reviewWire) complete() bool {
	return w.ReviewID != "" && w.OrderID != "" && w.RequestKey != "" && w.Status != "" && !w.CreatedAt.IsZero()
}

func (w reviewWire) review(replayed bool) Review {
	return Review{
		ReviewID: w.ReviewID, OrderID: w.OrderID, ReviewType: w.ReviewType,
		RequestKey: w.RequestKey, Status: w.Status, CreatedAt: w.CreatedAt, Replayed: replayed,
	}
}

// CreateReview asks the Risk API to create a review under requestKey
// (sent as Idempotency-Key). Sending the same key again returns the same
// review (Replayed=true) rather than a second one. A 404 order_not_found or
// 422 is ClassRejected; see the package doc for every other class.
func (c *RiskClient) CreateReview(ctx context.Context, requestKey string, in CreateReviewInput) (Review, error) {
	const op = OpCreateReview
	if !validRequestKey(requestKey) {
		return Review{}, invalidInput(op, "request key must be 1-255 visible ASCII characters")
	}
	if blank := firstBlank([2]string{"order_id", in.OrderID}, [2]string{"reason", in.Reason}, [2]string{"review_type", in.ReviewType}); blank != "" {
		return Review{}, invalidInput(op, blank+" is required")
	}
	resp, err := c.endpoint.do(ctx, request{
		op:     op,
		method: http.MethodPost,
		url:    c.endpoint.url(nil, "reviews"),
		header: http.Header{"Idempotency-Key": {requestKey}},
		body: map[string]string{
			"order_id":    in.OrderID,
			"reason":      in.Reason,
			"review_type": in.ReviewType,
		},
	})
	if err != nil {
		return Review{}, err
	}
	if resp.status != http.StatusCreated && resp.status != http.StatusOK {
		return Review{}, statusError(op, resp, ClassRejected)
	}
	var w reviewWire
	if err := decodeSuccess(op, resp, &w); err != nil {
		return Review{}, err
	}
	if !w.complete() {
		return Review{}, mismatch(op, resp.status, "review is missing required fields")
	}
	if w.RequestKey != requestKey || w.OrderID != in.OrderID || w.ReviewType != in.ReviewType {
		return Review{}, mismatch(op, resp.status, "review %s is not the one requested (request key, order or type differ)", w.ReviewID)
	}
	return w.review(resp.status == http.StatusOK), nil
}

// FindReviewByRequestKey is the authoritative lookup the reconciler uses.
// found=false with a nil error is a proven absence; any error is
// inconclusive. Several reviews for one key is ErrMultipleMatches.
func (c *RiskClient) FindReviewByRequestKey(ctx context.Context, requestKey string) (Review, bool, error) {
	const op = OpFindReviewByRequestKey
	if !validRequestKey(requestKey) {
		return Review{}, false, invalidInput(op, "request key must be 1-255 visible ASCII characters")
	}
	var body struct {
		Reviews *[]reviewWire `json:"reviews"`
	}
	// A 404 here is a missing route, not an absent review: inconclusive.
	query := url.Values{"request_key": {requestKey}}
	if err := c.endpoint.getJSON(ctx, op, c.endpoint.url(query, "reviews"), ClassUnknown, &body); err != nil {
		return Review{}, false, err
	}
	if body.Reviews == nil {
		return Review{}, false, mismatch(op, http.StatusOK, "reviews field is missing")
	}
	matches := *body.Reviews
	for _, w := range matches {
		if !w.complete() {
			return Review{}, false, mismatch(op, http.StatusOK, "review is missing required fields")
		}
		// The answer is filtered by request key. A review under another key
		// means the filter was not applied (an ignored or renamed parameter
		// answers with a page of all reviews), so a zero here would be no
		// proof that ours is absent.
		if w.RequestKey != requestKey {
			return Review{}, false, mismatch(op, http.StatusOK, "review %s has another request key: the lookup was not filtered by ours", w.ReviewID)
		}
	}
	switch len(matches) {
	case 0:
		return Review{}, false, nil
	case 1:
		return matches[0].review(false), true, nil
	default:
		return Review{}, false, &Error{Class: ClassUnknown, Op: op, StatusCode: http.StatusOK, Code: CodeMultipleMatches,
			Err: fmt.Errorf("%d reviews for one request key: %w", len(matches), ErrMultipleMatches)}
	}
}

// GetReview reads a review by id; ClassNotFound when the Risk API has none.
func (c *RiskClient) GetReview(ctx context.Context, reviewID string) (Review, error) {
	const op = OpGetReview
	if err := pathID(op, "review_id", reviewID); err != nil {
		return Review{}, err
	}
	var w reviewWire
	if err := c.endpoint.getJSON(ctx, op, c.endpoint.url(nil, "reviews", reviewID), ClassNotFound, &w); err != nil {
		return Review{}, err
	}
	if !w.complete() || w.ReviewID != reviewID {
		return Review{}, mismatch(op, http.StatusOK, "response is not review %s", reviewID)
	}
	return w.review(false), nil
}

// GetOrder reads who owns an order; ClassNotFound when it does not exist.
func (c *RiskClient) GetOrder(ctx context.Context, orderID string) (Order, error) {
	const op = OpGetOrder
	if err := pathID(op, "order_id", orderID); err != nil {
		return Order{}, err
	}
	var w struct {
		OrderID    string `json:"order_id"`
		MerchantID string `json:"merchant_id"`
	}
	if err := c.endpoint.getJSON(ctx, op, c.endpoint.url(nil, "orders", orderID), ClassNotFound, &w); err != nil {
		return Order{}, err
	}
	if w.OrderID != orderID || w.MerchantID == "" {
		return Order{}, mismatch(op, http.StatusOK, "response is not order %s with a merchant", orderID)
	}
	return Order{OrderID: w.OrderID, MerchantID: w.MerchantID}, nil
}
