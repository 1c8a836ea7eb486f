package provider

import "strings"

// MaxRequestKeyLen bounds a request key sent as Idempotency-Key.
const MaxRequestKeyLen = 255

// validRequestKey accepts 1..MaxRequestKeyLen visible ASCII characters, so
// the key travels unchanged in a header and a query string.
func validRequestKey(key string) bool {
	if key == "" || len(key) > MaxRequestKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// firstBlank returns the name of the first blank field, or "".
func firstBlank(fields ...[2]string) string {
	for _, f := range fields {
		if strings.TrimSpace(f[1]) == "" {
			return f[0]
		}
	}
	return ""
}

// pathID checks an identifier that becomes one URL path segment: present,
// and not a dot segment that URL cleaning would turn into another route.
func pathID(op, name, id string) *Error {
	if blank := firstBlank([2]string{name, id}); blank != "" {
		return invalidInput(op, blank+" is required")
	}
	if id == "." || id == ".." {
		return invalidInput(op, name+" must not be a dot segment")
	}
	return nil
}
