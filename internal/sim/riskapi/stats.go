package riskapi

import "maps"

// Stats is what GET /_sim/stats reports. Counters start at zero on Reset.
type Stats struct {
	// CreateCalls counts authenticated POST /reviews, whatever their outcome.
	CreateCalls int `json:"create_calls"`
	// ReviewsCommitted counts reviews actually created (a same-key replay
	// is not a commit).
	ReviewsCommitted int            `json:"reviews_committed"`
	ReviewsByOrder   map[string]int `json:"reviews_by_order"`
	// LookupCalls counts authenticated GET /reviews?request_key=.
	LookupCalls int `json:"lookup_calls"`
	// MaxInFlight is the highest number of non-/_sim requests handled at
	// the same moment.
	MaxInFlight int `json:"max_in_flight"`
	// ForeignAuthorizationSeen is true once any request carried an
	// Authorization header (a caller's token forwarded downstream).
	ForeignAuthorizationSeen bool `json:"foreign_authorization_seen"`
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	snapshot := s.counters
	snapshot.ReviewsByOrder = maps.Clone(s.counters.ReviewsByOrder)
	s.mu.Unlock()
	snapshot.MaxInFlight = s.traffic.MaxInFlight()
	snapshot.ForeignAuthorizationSeen = s.traffic.ForeignAuthorizationSeen()
	return snapshot
}
