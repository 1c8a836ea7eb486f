package operation

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on keys. DynamoDB allows 2048-byte partition keys; ours stay far
// below so a scoped key plus its prefix always fits.
const (
	MinOperationIDLen = 8
	MaxOperationIDLen = 128
	MaxPrincipalLen   = 256
	MaxToolLen        = 64
	MaxBusinessKeyLen = 512
)

// RequestKey is the caller's operation_id scoped by client principal,
// tenant (merchant or team), end user and tool, so one client's, one
// tenant's or one user's key never collides with, blocks or reveals
// another's, even when two tenants, or two people of one tenant, share one
// MCP client.
type RequestKey struct {
	ClientID string
	// TenantID is the caller's tenant from the verified token; empty when
	// the token names none (that is a scope of its own, not a wildcard).
	TenantID string
	// Subject is the end user (the token's subject). The request digest
	// binds the end user too, so another user's same operation_id could
	// never be a replay, only a conflict: a key space shared by a tenant's
	// users would let one block another's key and learn which keys a
	// colleague has used.
	Subject     string
	Tool        string
	OperationID string
}

// NewRequestKey validates the five parts and builds the key.
func NewRequestKey(clientID, tenantID, subject, tool, operationID string) (RequestKey, error) {
	if err := ValidateOperationID(operationID); err != nil {
		return RequestKey{}, err
	}
	if err := validatePrincipal("client_principal", clientID); err != nil {
		return RequestKey{}, err
	}
	if tenantID != "" {
		if err := validatePrincipal("tenant", tenantID); err != nil {
			return RequestKey{}, err
		}
	}
	if err := validatePrincipal("end_user_principal", subject); err != nil {
		return RequestKey{}, err
	}
	if err := validateToolName(tool); err != nil {
		return RequestKey{}, err
	}
	return RequestKey{ClientID: clientID, TenantID: tenantID, Subject: subject, Tool: tool, OperationID: operationID}, nil
}

// ValidateOperationID enforces 8–128 characters of [A-Za-z0-9._:-].
func ValidateOperationID(id string) error {
	if len(id) < MinOperationIDLen || len(id) > MaxOperationIDLen {
		return invalid("operation_id", fmt.Sprintf("length must be %d to %d characters", MinOperationIDLen, MaxOperationIDLen))
	}
	for _, r := range id {
		if !isIDRune(r) {
			return invalid("operation_id", "allowed characters are A-Z a-z 0-9 . _ : -")
		}
	}
	return nil
}

func isIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '.' || r == '_' || r == ':' || r == '-'
}

func validatePrincipal(field, v string) error {
	if v == "" {
		return invalid(field, "must not be empty")
	}
	if len(v) > MaxPrincipalLen || !utf8.ValidString(v) {
		return invalid(field, fmt.Sprintf("must be valid UTF-8 of at most %d bytes", MaxPrincipalLen))
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return invalid(field, "must not contain control characters")
		}
	}
	return nil
}

func validateToolName(tool string) error {
	if tool == "" || len(tool) > MaxToolLen {
		return invalid("tool", fmt.Sprintf("must be 1 to %d characters", MaxToolLen))
	}
	for _, r := range tool {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
			return invalid("tool", "allowed characters are a-z 0-9 _ .")
		}
	}
	return nil
}

// Scope is the one definition of what an operation_id is scoped by:
// client principal, tenant, end user and tool, each length-prefixed, so no
// choice of parts can produce another scope's text. The "k3" prefix names
// the scheme (client, tenant, subject, tool): a text of the earlier
// schemes (k2: client, tenant, tool; before it client and tool) can never
// equal one of these. Everything that names or correlates a caller's key
// (the stored key and handle, the audit's operation_hash) derives from it,
// so none of them can scope the key differently.
func (k RequestKey) Scope() string {
	return fmt.Sprintf("k3|%d:%s|%d:%s|%d:%s|%d:%s", len(k.ClientID), k.ClientID, len(k.TenantID), k.TenantID,
		len(k.Subject), k.Subject, len(k.Tool), k.Tool)
}

// Scoped is the unambiguous text form of the key: the operation_id under
// its Scope (it comes last, so it needs no length prefix).
func (k RequestKey) Scoped() string {
	return k.Scope() + "|" + k.OperationID
}

// Handle is the public handle of the operation (review_id, the key sent
// downstream as Idempotency-Key): derived from the scoped key, so every
// replica computes the same one, and opaque, so it reveals neither the
// client principal nor the caller's operation_id.
func (k RequestKey) Handle() string {
	sum := sha256.Sum256([]byte(k.Scoped()))
	return "op_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// ValidateHandle checks the shape of a handle received from a caller before
// it is used to read anything.
func ValidateHandle(h string) error {
	if len(h) != 29 || !strings.HasPrefix(h, "op_") {
		return invalid("handle", "must be op_ followed by 26 characters")
	}
	for _, r := range h[3:] {
		if !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7') {
			return invalid("handle", "must be op_ followed by 26 characters of [a-z2-7]")
		}
	}
	return nil
}

// NewOperationID mints an operation_id for a caller that sent none. The
// caller must reuse the returned id on every retry.
func NewOperationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mint operation id: %w", err)
	}
	return "srv-" + hex.EncodeToString(b[:]), nil
}

// NewBusinessKey joins the parts of a business fact (e.g. order, review
// type, generation) under a kind. Parts may not be empty or contain the
// separator, so distinct facts never share a key.
func NewBusinessKey(kind string, parts ...string) (string, error) {
	if err := validateToolName(kind); err != nil {
		return "", invalid("business_key", "kind: "+err.Error())
	}
	if len(parts) == 0 {
		return "", invalid("business_key", "needs at least one part")
	}
	for i, p := range parts {
		if p == "" || strings.ContainsAny(p, "|\x00") || !utf8.ValidString(p) {
			return "", invalid("business_key", fmt.Sprintf("part %d must be non-empty UTF-8 without '|'", i))
		}
	}
	key := kind + "|" + strings.Join(parts, "|")
	if len(key) > MaxBusinessKeyLen {
		return "", invalid("business_key", fmt.Sprintf("must be at most %d bytes", MaxBusinessKeyLen))
	}
	return key, nil
}

// RequestDigest binds a request key to one intent: SHA-256 over the
// canonical JSON of tool, end-user principal and validated arguments.
// Canonical means object keys sorted and numbers kept as written, so the
// same arguments always hash the same whatever their field order.
func RequestDigest(tool, endUser string, args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("digest: encode arguments: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return "", fmt.Errorf("digest: decode arguments: %w", err)
	}
	canonical, err := json.Marshal(map[string]any{"tool": tool, "end_user": endUser, "arguments": generic})
	if err != nil {
		return "", fmt.Errorf("digest: canonical form: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
