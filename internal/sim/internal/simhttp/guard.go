package simhttp

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// SimPrefix is the path prefix of the simulator's control endpoints. They
// need no API key and are not counted as downstream traffic.
const SimPrefix = "/_sim/"

// Guard wraps a simulator's routes with what every simulated provider does
// before routing: it notes any Authorization header (a forwarded caller
// token is a defect we want tests to see), counts the request in flight and
// checks the service key.
func Guard(apiKey string, traffic *Traffic, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, present := r.Header["Authorization"]; present {
			traffic.noteForeignAuthorization()
		}
		if strings.HasPrefix(r.URL.Path, SimPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		leave := traffic.Enter()
		defer leave()
		if !validKey(apiKey, r.Header.Get("X-Api-Key")) {
			WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid X-Api-Key")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func validKey(want, got string) bool {
	if want == "" || got == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
