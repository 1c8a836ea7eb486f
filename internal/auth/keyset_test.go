package auth_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/auth"
)

const (
	rsaJWK = `{"kty":"RSA","kid":"r1","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"`
	ecJWK  = `{"kty":"EC","kid":"e1","alg":"ES256","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`
)

// What API Gateway's JWT authorizer needs of an issuer's key set: an RSA
// key for signing. A key for encryption does not count; a key of a type
// nobody here reads is passed over, not held against the set.
func TestAKeySetHasARSASigningKeyOnlyWhenOneIsForSigning(t *testing.T) {
	for name, tc := range map[string]struct {
		set  string
		want bool
	}{
		"RSA, use sig":          {`{"keys":[` + rsaJWK + `,"use":"sig"}]}`, true},
		"RSA, no use":           {`{"keys":[` + rsaJWK + `}]}`, true},
		"RSA for encryption":    {`{"keys":[` + rsaJWK + `,"use":"enc"}]}`, false},
		"EC only":               {`{"keys":[` + ecJWK + `]}`, false},
		"an unknown kty beside": {`{"keys":[{"kty":"XYZ","kid":"x"},` + rsaJWK + `,"use":"sig"}]}`, true},
		"no keys":               {`{"keys":[]}`, false},
	} {
		got, err := auth.KeySetHasSigningKeyType([]byte(tc.set), "RSA")
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, got, name)
	}
	for name, raw := range map[string]string{
		"a bare key, not a set": rsaJWK + `}`,
		"not JSON":              `<html>`,
	} {
		_, err := auth.KeySetHasSigningKeyType([]byte(raw), "RSA")
		assert.ErrorContains(t, err, "not a JSON Web Key Set", name)
	}
}
