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
// operations, their stores or their providers; it reaches none of this
// module at all.
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
		if path != module+"internal/mcpserver" {
			reached = append(reached, strings.TrimPrefix(path, module))
		}
	}
	slices.Sort(reached)
	if len(reached) > 0 {
		t.Errorf("internal/mcpserver depends on %v; it must depend on none of this module's packages", reached)
	}
}
