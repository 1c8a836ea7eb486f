package store

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/intentgate/intentgate/internal/operation"
)

// requestToken is a ClientRequestToken (at most 36 characters) derived from
// the scoped request key and the attempt's nonce.
func requestToken(k operation.RequestKey, nonce string) string {
	sum := sha256.Sum256([]byte(k.Scoped() + "|" + nonce))
	return hex.EncodeToString(sum[:])[:36]
}
