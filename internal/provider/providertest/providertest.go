// Package providertest holds test helpers for code that calls the provider
// clients. Only tests import it.
package providertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/provider"
)

// RequireClass fails the test unless err is a *provider.Error of class
// want, and returns that error for further checks.
func RequireClass(t testing.TB, want provider.Class, err error) *provider.Error {
	t.Helper()
	require.Error(t, err)
	var perr *provider.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, want, perr.Class, "error: %v", err)
	return perr
}
