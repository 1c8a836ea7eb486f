package auth

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// RFC 7517 Appendix A.1's example keys.
	exampleRSA = `{"kty":"RSA","kid":"2011-04-29","alg":"RS256","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB"}`
	exampleEC  = `{"kty":"EC","kid":"1","crv":"P-256","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM","use":"enc"}`
)

func TestTheExampleKeysOfRFC7517AreRead(t *testing.T) {
	rsaKey := readPublicKey(json.RawMessage(exampleRSA))
	require.NoError(t, rsaKey.unreadable)
	pub, ok := rsaKey.key.(*rsa.PublicKey)
	require.True(t, ok)
	assert.Equal(t, 2048, pub.N.BitLen())
	assert.Equal(t, 65537, pub.E)
	assert.Equal(t, publicKey{kid: "2011-04-29", kty: "RSA", alg: "RS256"}, publicKey{kid: rsaKey.kid, kty: rsaKey.kty, use: rsaKey.use, alg: rsaKey.alg})

	ecKey := readPublicKey(json.RawMessage(exampleEC))
	require.NoError(t, ecKey.unreadable)
	_, ok = ecKey.key.(*ecdsa.PublicKey)
	require.True(t, ok)
	assert.Equal(t, "enc", ecKey.use, "read as published; publicKeyFor refuses it for signatures")
}

// RFC 7517 §5: members of a type not understood, missing required
// members or with values out of range are passed over, each on its own.
func TestAJWKThatIsNoValidPublicKeyIsUnreadable(t *testing.T) {
	const n2048 = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
	const x, y = "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4", "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"
	rsaWith := func(e string) string { return fmt.Sprintf(`{"kty":"RSA","kid":"k","n":%q,"e":%q}`, n2048, e) }
	for name, member := range map[string]string{
		"unknown key type":         `{"kty":"AKP","kid":"k","alg":"ML-DSA-65","pub":"AAAA"}`,
		"symmetric key":            `{"kty":"oct","kid":"k","k":"c2VjcmV0"}`,
		"Ed25519 key":              `{"kty":"OKP","kid":"k","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`,
		"no kty":                   `{"kid":"k","n":"AQAB","e":"AQAB"}`,
		"not an object":            `"RSA"`,
		"RSA without n":            `{"kty":"RSA","kid":"k","e":"AQAB"}`,
		"RSA n not base64url":      `{"kty":"RSA","kid":"k","n":"not base64!","e":"AQAB"}`,
		"RSA without e":            rsaWith(""),
		"RSA exponent 1":           rsaWith("AQ"),
		"RSA even exponent":        rsaWith("AQAA"),
		"RSA exponent over 31 bit": rsaWith("gAAAAQ"),
		"RSA exponent of 5 bytes":  rsaWith("AQAAAAE"),
		"EC curve not supported":   fmt.Sprintf(`{"kty":"EC","kid":"k","crv":"secp256k1","x":%q,"y":%q}`, x, y),
		"EC point off the curve":   fmt.Sprintf(`{"kty":"EC","kid":"k","crv":"P-256","x":%q,"y":%q}`, x, x),
		"EC coordinate too short":  fmt.Sprintf(`{"kty":"EC","kid":"k","crv":"P-256","x":%q,"y":%q}`, x[:40], y),
		"EC P-384 with P-256 size": fmt.Sprintf(`{"kty":"EC","kid":"k","crv":"P-384","x":%q,"y":%q}`, x, y),
	} {
		k := readPublicKey(json.RawMessage(member))
		assert.Error(t, k.unreadable, name)
		assert.Nil(t, k.key, name)
	}
}

func TestAKeySetWithNoReadableKeyIsRefused(t *testing.T) {
	keys, err := parseJWKS([]byte(`{"keys":[{"kty":"AKP","kid":"pq"},{"kty":"oct","kid":"s"}]}`))
	require.NoError(t, err, "read: each member passed over on its own")
	assert.ErrorContains(t, requireReadable(keys), "none of the JWKS's 2 keys can be read")
	keys, err = parseJWKS([]byte(`{"keys":[]}`))
	require.NoError(t, err)
	assert.ErrorContains(t, requireReadable(keys), "has no keys")
	keys, err = parseJWKS([]byte(`{"keys":[{"kty":"AKP","kid":"pq"},` + exampleRSA + `]}`))
	require.NoError(t, err)
	assert.NoError(t, requireReadable(keys))
}

func TestARSAKeyShorterThan2048BitsIsRefusedWhereItIsUsed(t *testing.T) {
	short := `{"kty":"RSA","kid":"k","n":"` + "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4" + `","e":"AQAB"}`
	k := readPublicKey(json.RawMessage(short))
	require.NoError(t, k.unreadable)
	_, err := publicKeyFor(k, "RS256")
	assert.ErrorContains(t, err, "minimum 2048")
}

func TestMaxAgeIsReadFromCacheControl(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"max-age=600":                  10 * time.Minute,
		"public, max-age=900":          15 * time.Minute,
		"MAX-AGE=900":                  15 * time.Minute,
		`max-age="900"`:                15 * time.Minute,
		"max-age=10":                   jwksMinInterval,
		"max-age=99999999999999999999": jwksMinInterval, // not a number this reads: as if absent
		"max-age=31536000":             jwksMaxInterval,
		"no-cache":                     jwksMinInterval,
		"max-age=-5":                   jwksMinInterval,
		"s-maxage=900, max-age=1200":   20 * time.Minute,
		"":                             jwksMinInterval,
	} {
		h := http.Header{}
		if value != "" {
			h.Set("Cache-Control", value)
		}
		assert.Equal(t, want, keepFor(h, now), "Cache-Control: %s", value)
	}
	h := http.Header{}
	h.Set("Expires", now.Add(30*time.Minute).Format(http.TimeFormat))
	assert.Equal(t, 30*time.Minute, keepFor(h, now), "Expires")
}
