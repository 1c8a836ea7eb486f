package auth

import (
	"context"
	"slices"
)

// Subject is the authenticated caller of one request.
type Subject struct {
	// ClientID is the client principal: the token's client_id, else azp.
	ClientID string
	// UserID is the end-user principal: the token's sub.
	UserID string
	// MerchantID is the merchant/tenant claim; empty when the token has none.
	MerchantID string
	// Roles are the end user's roles, in token order without duplicates.
	Roles []string
	// Issuer is the token's iss.
	Issuer string
	// Scopes are the token's OAuth scopes: its scope claim (space
	// separated), else its scp claim (an array or a string).
	Scopes []string
}

// HasRole reports whether the subject holds role (exact, case-sensitive).
func (s Subject) HasRole(role string) bool {
	return slices.Contains(s.Roles, role)
}

type subjectKey struct{}

// WithSubject returns a context carrying s.
func WithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject stored by [WithSubject] (normally by
// [Middleware]); ok is false when the request was never authenticated.
func SubjectFrom(ctx context.Context) (Subject, bool) {
	s, ok := ctx.Value(subjectKey{}).(Subject)
	return s, ok
}
