package tasks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"

	"github.com/intentgate/intentgate/internal/operation"
)

// MinKeyBytes is the shortest task id key accepted.
const MinKeyBytes = 32

// IDs mints and checks task ids. A task id is the operation's handle plus a
// 128-bit HMAC of it under a server key: the handle alone is derived from
// the caller's key (possibly a guessable operation_id), the MAC is what a
// third party cannot produce. Every replica holding the key verifies every
// id without a store read, and nothing is written to mint one.
type IDs struct {
	key []byte
}

// NewIDs returns an id codec for key (at least MinKeyBytes bytes). Every
// instance answering tasks must share the key.
func NewIDs(key []byte) (IDs, error) {
	if len(key) < MinKeyBytes {
		return IDs{}, errors.New("tasks: task id key must be at least 32 bytes")
	}
	return IDs{key: append([]byte(nil), key...)}, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

const idPrefix = "tsk_"

// For returns the task id of the operation with this handle.
func (ids IDs) For(handle string) string {
	return idPrefix + strings.TrimPrefix(handle, "op_") + "_" + ids.mac(handle)
}

// Handle returns the operation handle a task id names, or false for any id
// this server did not mint (malformed, or a MAC that does not verify).
func (ids IDs) Handle(taskID string) (string, bool) {
	rest, ok := strings.CutPrefix(taskID, idPrefix)
	if !ok {
		return "", false
	}
	body, mac, ok := strings.Cut(rest, "_")
	if !ok {
		return "", false
	}
	handle := "op_" + body
	if operation.ValidateHandle(handle) != nil {
		return "", false
	}
	if !hmac.Equal([]byte(mac), []byte(ids.mac(handle))) {
		return "", false
	}
	return handle, true
}

func (ids IDs) mac(handle string) string {
	m := hmac.New(sha256.New, ids.key)
	m.Write([]byte("intentgate task id v1|" + handle))
	return strings.ToLower(idEncoding.EncodeToString(m.Sum(nil)[:16]))
}
