// Package enginetest gives integration tests a DynamoDB-compatible engine
// (internal/localengine: local moto by default, or the engine the
// environment names). A test package starts one engine in TestMain with
// Main and gives each test its own small table named by TableName; NewStore
// is that table behind a store, created and deleted for the test.
//
// Only tests import this package: it links "testing".
package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/intentgate/intentgate/internal/localengine"
)

// Engine is the engine of a test binary: a localengine.Engine with the
// per-test helpers of this package.
type Engine struct {
	*localengine.Engine
}

// Main starts one engine for a test binary, hands it to setup, runs the
// tests and stops the engine. Use it from TestMain:
//
//	var engine *enginetest.Engine
//
//	func TestMain(m *testing.M) {
//		os.Exit(enginetest.Main(m, func(e *enginetest.Engine) { engine = e }))
//	}
//
// It returns the exit code for os.Exit; an engine that cannot start fails
// the whole binary with the reason on stderr.
func Main(m *testing.M, setup func(*Engine)) int {
	started, err := localengine.Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "enginetest: %v\n", err)
		return 1
	}
	e := &Engine{Engine: started}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "enginetest: %v\n", err)
		}
	}()
	if setup != nil {
		setup(e)
	}
	return m.Run()
}

// maxNameFromTest bounds the part of a table name taken from the test name;
// names stay short and readable in engine logs.
const maxNameFromTest = 48

// TableName returns a table name unique to this call: "it-", the test name
// reduced to DynamoDB's table-name alphabet, and a random suffix, so tests
// and test binaries sharing one engine never collide.
func TableName(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= maxNameFromTest {
			break
		}
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatalf("table name suffix: %v", err)
	}
	return "it-" + b.String() + "-" + hex.EncodeToString(suffix)
}
