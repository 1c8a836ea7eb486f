package tasks

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// MinKeyBytes is the shortest task id key accepted.
const MinKeyBytes = 32

// MaxKeys bounds the keys an id is checked against: a forged id costs one
// HMAC per key, and a rotation needs two.
const MaxKeys = 4

// IDs mints and checks task ids. A task id is the operation's handle, the
// operation's creation time and a 128-bit HMAC of both under a server key:
// the handle alone is derived from the caller's key (possibly a guessable
// operation_id), the MAC is what a third party cannot produce. The
// creation time ties the id to one operation: a handle outlives its
// operation (a FAILED one expires after the retention, and the same
// operation_id then records a new one under the same handle), and the old
// task must not name the new operation. Every replica holding the key
// verifies every id without a store read, and nothing is written to mint
// one.
//
// It may hold several keys, so the key can be rotated without turning
// every outstanding task into "Task not found": ids are minted under the
// first and verified under any (docs/design.md, "MCP Tasks").
type IDs struct {
	keys [][]byte // keys[0] mints
}

// NewIDs returns an id codec that mints under keys[0] and verifies under
// every key (each at least MinKeyBytes bytes, at most MaxKeys, none
// twice). Every instance answering tasks must verify what any other
// mints.
func NewIDs(keys ...[]byte) (IDs, error) {
	switch {
	case len(keys) == 0:
		return IDs{}, errors.New("tasks: no task id key")
	case len(keys) > MaxKeys:
		return IDs{}, fmt.Errorf("tasks: %d task id keys, want at most %d", len(keys), MaxKeys)
	}
	ids := IDs{keys: make([][]byte, 0, len(keys))}
	for i, key := range keys {
		if len(key) < MinKeyBytes {
			return IDs{}, fmt.Errorf("tasks: task id key %d of %d is %d bytes, want at least %d", i+1, len(keys), len(key), MinKeyBytes)
		}
		if slices.ContainsFunc(ids.keys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			return IDs{}, fmt.Errorf("tasks: task id key %d of %d repeats an earlier one", i+1, len(keys))
		}
		ids.keys = append(ids.keys, bytes.Clone(key))
	}
	return ids, nil
}

// Keys reads a task id key setting: one key, or several separated by white
// space, the one to mint under first (a rotation: "new old"). The keys
// are checked as NewIDs checks them; an error never carries a key.
func Keys(setting string) ([][]byte, error) {
	fields := strings.Fields(setting)
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		keys[i] = []byte(f)
	}
	if _, err := NewIDs(keys...); err != nil {
		return nil, err
	}
	return keys, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

const (
	idPrefix = "tsk_"
	// idLength is the one length of a task id: tsk_, the handle's 26
	// characters, _, the creation time's 13, _, the MAC's 26.
	idLength = len(idPrefix) + 26 + 1 + 13 + 1 + 26
)

// TaskRef is what a verified task id names: an operation handle, and the
// creation time of the one operation under it that the id stands for.
type TaskRef struct {
	Handle  string
	created int64 // UnixNano; 0 names no operation
}

// Names reports whether op is the operation the id was minted for: the
// operation its handle resolves to (for a deduplicated key, the holder)
// with the creation time in the id. Any other operation under the handle
// (a later one after expiry) is not.
func (r TaskRef) Names(op operation.Operation) bool {
	return r.created != 0 && !op.CreatedAt.IsZero() && op.CreatedAt.UnixNano() == r.created
}

// For returns the task id of the operation created at created that handle
// resolves to (its own handle, or a key bound to it by deduplication). A
// zero created mints an id that names no operation (a call whose insert's
// outcome is unknown): it verifies, and reads as unknown.
func (ids IDs) For(handle string, created time.Time) string {
	stamp := stampOf(created)
	return idPrefix + strings.TrimPrefix(handle, "op_") + "_" + stamp + "_" + mac(ids.keys[0], handle, stamp)
}

// Parse returns what a task id names, or false for any id this server did
// not mint (malformed, of another length, or a MAC that does not verify;
// ids of the earlier form without the creation time included). It reads
// nothing.
func (ids IDs) Parse(taskID string) (TaskRef, bool) {
	if len(taskID) != idLength {
		return TaskRef{}, false
	}
	rest, ok := strings.CutPrefix(taskID, idPrefix)
	if !ok {
		return TaskRef{}, false
	}
	parts := strings.Split(rest, "_")
	if len(parts) != 3 {
		return TaskRef{}, false
	}
	handle, stamp, given := "op_"+parts[0], parts[1], parts[2]
	if operation.ValidateHandle(handle) != nil {
		return TaskRef{}, false
	}
	created, ok := parseStamp(stamp)
	if !ok {
		return TaskRef{}, false
	}
	for _, key := range ids.keys {
		if hmac.Equal([]byte(given), []byte(mac(key, handle, stamp))) {
			return TaskRef{Handle: handle, created: created}, true
		}
	}
	return TaskRef{}, false
}

func mac(key []byte, handle, stamp string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("intentgate task id v2|" + handle + "|" + stamp))
	return strings.ToLower(idEncoding.EncodeToString(m.Sum(nil)[:16]))
}

// stampOf encodes a creation time as 13 characters of [a-z2-7]: its
// UnixNano, the precision the store keeps, big-endian.
func stampOf(created time.Time) string {
	if created.IsZero() {
		return stampOfNano(0)
	}
	return stampOfNano(created.UnixNano())
}

// parseStamp decodes stampOf's form; only its canonical spelling is
// accepted (the last character's unused bit is zero).
func parseStamp(stamp string) (int64, bool) {
	if len(stamp) != 13 || strings.ToLower(stamp) != stamp {
		return 0, false
	}
	b, err := idEncoding.DecodeString(strings.ToUpper(stamp))
	if err != nil || len(b) != 8 {
		return 0, false
	}
	n := int64(binary.BigEndian.Uint64(b))
	if stampOfNano(n) != stamp {
		return 0, false
	}
	return n, true
}

func stampOfNano(n int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}
