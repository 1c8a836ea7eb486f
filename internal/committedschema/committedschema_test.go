package committedschema_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/committedschema"
)

// recorder is a committedschema.T that keeps what a package's test would
// have been told.
type recorder struct {
	errors, logs []string
	stopped      bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Logf(format string, a ...any) { r.logs = append(r.logs, fmt.Sprintf(format, a...)) }
func (r *recorder) FailNow()                     { r.stopped = true; runtime.Goexit() }

// check runs Require as a package's test would, in a fresh package
// directory holding files (name under schemas/ -> text).
func check(t *testing.T, files map[string]string, schemas ...committedschema.Schema) *recorder {
	t.Helper()
	t.Chdir(t.TempDir())
	if files != nil {
		require.NoError(t, os.Mkdir(committedschema.Dir, 0o755))
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(committedschema.Dir, name), []byte(text), 0o644))
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		committedschema.Require(r, schemas...)
	}()
	<-done
	return r
}

const generated = `{"type":"object","properties":{"id":{"type":"string","pattern":"^a\u003cb$"}},"required":["id"],"additionalProperties":false}`

func formatted(t *testing.T, compact string) string {
	t.Helper()
	text, err := committedschema.Format(compact)
	require.NoError(t, err)
	return string(text)
}

func schema(generate, served string) committedschema.Schema {
	return committedschema.Schema{File: "schemas/x.input.json",
		Generate: func() string { return generate }, Served: func() string { return served }}
}

func TestAFileThatIsWhatTheTypesGeneratePasses(t *testing.T) {
	r := check(t, map[string]string{"x.input.json": formatted(t, generated)}, schema(generated, generated))
	assert.Empty(t, r.errors)
	assert.False(t, r.stopped)
}

func TestTheCommittedTextIsIndentedAndCompactsToTheGeneratedBytes(t *testing.T) {
	text := formatted(t, generated)
	assert.True(t, strings.HasPrefix(text, "{\n  \"type\": \"object\",\n"), text)
	assert.True(t, strings.HasSuffix(text, "}\n"))
	assert.Contains(t, text, `"^a\u003cb$"`, "the generator's escaping is kept as it is")
}

func TestAStaleFileFailsAndSaysHowToRegenerate(t *testing.T) {
	changed := strings.Replace(generated, `"required":["id"]`, `"required":[]`, 1)
	r := check(t, map[string]string{"x.input.json": formatted(t, changed)}, schema(generated, changed))
	require.Len(t, r.errors, 1)
	assert.Contains(t, r.errors[0], "schemas/x.input.json is stale")
	assert.Contains(t, r.errors[0], committedschema.RegenerateCommand)
}

func TestAMissingFileFailsAndSaysHowToRegenerate(t *testing.T) {
	r := check(t, map[string]string{}, schema(generated, generated))
	require.Len(t, r.errors, 1)
	assert.Contains(t, r.errors[0], "schemas/x.input.json is missing")
	assert.Contains(t, r.errors[0], committedschema.RegenerateCommand)
}

// The embedded copy is what the package serves; a file rewritten after
// the package was built is not served until it is built again.
func TestServingOtherBytesThanTheGeneratedFails(t *testing.T) {
	r := check(t, map[string]string{"x.input.json": formatted(t, generated)}, schema(generated, `{"type":"object"}`))
	require.Len(t, r.errors, 1)
	assert.Contains(t, r.errors[0], "what the package serves is not the generated schema")
}

func TestAFileNoListedSchemaGeneratesFails(t *testing.T) {
	r := check(t, map[string]string{"x.input.json": formatted(t, generated), "gone.output.json": "{}\n", "README.md": "kept"},
		schema(generated, generated))
	require.Len(t, r.errors, 1)
	assert.Contains(t, r.errors[0], "gone.output.json is generated from no type")
}

func TestUpdateRewritesStaleAndMissingFilesAndRemovesUnlistedOnes(t *testing.T) {
	t.Setenv(committedschema.UpdateEnv, "1")
	other := committedschema.Schema{File: "schemas/y.output.json",
		Generate: func() string { return `{"type":"object"}` }, Served: func() string { return "stale build" }}
	r := check(t, map[string]string{"x.input.json": "{}\n", "gone.output.json": "{}\n", "README.md": "kept"},
		schema(generated, "stale build"), other)
	assert.Empty(t, r.errors)

	x, err := os.ReadFile("schemas/x.input.json")
	require.NoError(t, err)
	assert.Equal(t, formatted(t, generated), string(x))
	y, err := os.ReadFile("schemas/y.output.json")
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"type\": \"object\"\n}\n", string(y))
	assert.NoFileExists(t, "schemas/gone.output.json")
	assert.FileExists(t, "schemas/README.md")
}
