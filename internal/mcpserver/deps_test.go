package mcpserver

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/intentgate/intentgate/"

// TestTheMCPBoundaryKnowsNoOperations: the protocol boundary's build
// (test files aside) reaches no package of this module that knows about
// operations, their stores or their providers. The only package of this
// module it may reach is requestid, which knows nothing but the request's
// ids (set by the front, read by the boundary and the audit alike).
func TestTheMCPBoundaryKnowsNoOperations(t *testing.T) {
	seen := map[string]bool{}
	var visit func(path, dir string)
	visit = func(path, dir string) {
		if seen[path] {
			return
		}
		seen[path] = true
		pkg, err := build.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module) {
				visit(imp, pkg.Dir)
			}
		}
	}
	visit(module+"internal/mcpserver", ".")
	var reached []string
	for path := range seen {
		if path != module+"internal/mcpserver" && path != module+"internal/requestid" {
			reached = append(reached, strings.TrimPrefix(path, module))
		}
	}
	slices.Sort(reached)
	if len(reached) > 0 {
		t.Errorf("internal/mcpserver depends on %v; it may depend on no package of this module but requestid", reached)
	}
}
