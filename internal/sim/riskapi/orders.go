package riskapi

import (
	"fmt"
	"net/http"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// Order is the Risk API's view of an order: who owns it.
type Order struct {
	OrderID    string `json:"order_id"`
	MerchantID string `json:"merchant_id"`
}

// seedOrders builds O20260728001–050 for M1 and 051–100 for M2.
func seedOrders() map[string]string {
	orders := make(map[string]string, 100)
	for i := 1; i <= 100; i++ {
		merchant := "M1"
		if i > 50 {
			merchant = "M2"
		}
		orders[fmt.Sprintf("O20260728%03d", i)] = merchant
	}
	return orders
}

func (s *Server) handleGetOrder(w http.ResponseWriter, r *http.Request) {
	s.arrive(nil)
	id := r.PathValue("id")
	s.mu.Lock()
	merchant, ok := s.orders[id]
	s.mu.Unlock()
	if !ok {
		simhttp.WriteError(w, http.StatusNotFound, "order_not_found", "no order "+id)
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, Order{OrderID: id, MerchantID: merchant})
}
