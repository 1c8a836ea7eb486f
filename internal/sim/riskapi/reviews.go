package riskapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// maxRequestKey bounds the Idempotency-Key header.
const maxRequestKey = 255

// Review is a risk review as the Risk API returns it. The reason text is
// accepted but never echoed back.
type Review struct {
	ReviewID   string    `json:"review_id"`
	OrderID    string    `json:"order_id"`
	ReviewType string    `json:"review_type"`
	RequestKey string    `json:"request_key"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
}

type createRequest struct {
	OrderID    string `json:"order_id"`
	Reason     string `json:"reason"`
	ReviewType string `json:"review_type"`
}

type lookupResponse struct {
	Reviews []Review `json:"reviews"`
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.arrive(&s.counters.CreateCalls)

	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > maxRequestKey {
		simhttp.WriteError(w, http.StatusBadRequest, "missing_idempotency_key",
			fmt.Sprintf("Idempotency-Key header is required (1-%d bytes)", maxRequestKey))
		return
	}
	var req createRequest
	if err := simhttp.DecodeJSON(r, &req); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if strings.TrimSpace(req.OrderID) == "" || strings.TrimSpace(req.Reason) == "" || strings.TrimSpace(req.ReviewType) == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_request", "order_id, reason and review_type are required")
		return
	}

	s.mu.Lock()
	fault := s.createFaults.Next()
	s.mu.Unlock()
	if simhttp.FailBeforeCommit(w, r, string(fault), s.holdLimit, "review request rejected by risk policy (simulated)") {
		return
	}

	review, created, found := s.commit(key, req)
	if !found {
		simhttp.WriteError(w, http.StatusNotFound, "order_not_found", "no order "+req.OrderID)
		return
	}
	if simhttp.FailAfterCommit(w, string(fault)) {
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	simhttp.WriteJSON(w, status, review)
}

// commit creates the review for key, or returns the one already created for
// it. Check and insert happen under one lock: the dedupe is real.
func (s *Server) commit(key string, req createRequest) (review Review, created, orderFound bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byRequestKey[key]; ok {
		return s.reviews[id], false, true
	}
	if _, ok := s.orders[req.OrderID]; !ok {
		return Review{}, false, false
	}
	s.lastID++
	review = Review{
		ReviewID:   fmt.Sprintf("rv-%06d", s.lastID),
		OrderID:    req.OrderID,
		ReviewType: req.ReviewType,
		RequestKey: key,
		Status:     "OPEN",
		CreatedAt:  s.clock().UTC(),
	}
	s.reviews[review.ReviewID] = review
	s.byRequestKey[key] = review.ReviewID
	s.counters.ReviewsCommitted++
	s.counters.ReviewsByOrder[req.OrderID]++
	return review, true, true
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	s.arrive(&s.counters.LookupCalls)

	key := r.URL.Query().Get("request_key")
	if key == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_request", "request_key query parameter is required")
		return
	}

	s.mu.Lock()
	fault := s.lookupFaults.Next()
	s.mu.Unlock()
	switch fault {
	case LookupTimeout:
		if !simhttp.Hold(r.Context(), s.holdLimit) {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated lookup timeout")
		}
		return
	case LookupError500:
		simhttp.WriteError(w, http.StatusInternalServerError, "internal", "simulated lookup failure")
		return
	}

	resp := lookupResponse{Reviews: []Review{}}
	s.mu.Lock()
	if id, ok := s.byRequestKey[key]; ok {
		resp.Reviews = append(resp.Reviews, s.reviews[id])
	}
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, resp)
}

func (s *Server) handleGetReview(w http.ResponseWriter, r *http.Request) {
	s.arrive(nil)
	id := r.PathValue("id")
	s.mu.Lock()
	review, ok := s.reviews[id]
	s.mu.Unlock()
	if !ok {
		simhttp.WriteError(w, http.StatusNotFound, "review_not_found", "no review "+id)
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, review)
}
