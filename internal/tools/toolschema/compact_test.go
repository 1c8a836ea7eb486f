package toolschema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compact gives json.Compact's bytes for every indented text json.Indent
// writes: every committed schema, and strings holding what could be taken
// for their end or for whitespace between tokens.
func TestCompactGivesTheBytesOfJSONCompact(t *testing.T) {
	texts := committedTexts(t)
	for _, v := range []any{
		map[string]any{"a": `say "hi"`, "b": `ends in a backslash \`, "c": `\\"`, "d": " spaced\n\tout ", "e": []any{"", `"`, `\`}},
		[]any{map[string]any{}, []any{}, "x y", 1.5, nil, true},
		`only a string with "quotes" and \ backslashes \\`,
	} {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, raw, "", "  "))
		texts = append(texts, indented.Bytes())
	}
	for _, text := range texts {
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, text))
		assert.Equal(t, want.String(), compact(text))
	}
}

// BenchmarkCompact: compact against json.Compact over every committed
// schema, the work of each cold start.
func BenchmarkCompact(b *testing.B) {
	texts := committedTexts(b)
	b.Run("compact", func(b *testing.B) {
		for b.Loop() {
			for _, text := range texts {
				_ = compact(text)
			}
		}
	})
	b.Run("json.Compact", func(b *testing.B) {
		for b.Loop() {
			for _, text := range texts {
				var out bytes.Buffer
				_ = json.Compact(&out, text)
			}
		}
	})
}

// committedTexts are the committed schema files of every tool package.
func committedTexts(tb testing.TB) [][]byte {
	committed, err := filepath.Glob("../*/schemas/*.json")
	require.NoError(tb, err)
	require.NotEmpty(tb, committed)
	var texts [][]byte
	for _, f := range committed {
		text, err := os.ReadFile(f)
		require.NoError(tb, err)
		texts = append(texts, text)
	}
	return texts
}
