package releaseapi

// RemoveTicket removes a ticket the way an operator cancels it in the
// release queue: afterwards neither a read by id nor a search finds it.
// It reports whether the ticket existed. Tests use it to show that an
// operator's "the effects were removed" is checked against the provider.
func (s *Server) RemoveTicket(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.tickets {
		if t.TicketID == id {
			s.tickets = append(s.tickets[:i], s.tickets[i+1:]...)
			return true
		}
	}
	return false
}
