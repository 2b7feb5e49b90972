package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module root, relative to this package's directory.
const root = "../.."

// docFiles are the Markdown files whose kcedar command lines are checked.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// inlineSpans returns the inline code spans of prose, a span broken over
// lines joined with spaces.
func inlineSpans(prose string) []string {
	var spans []string
	for _, m := range inlineCode.FindAllStringSubmatch(prose, -1) {
		spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return spans
}

// logicalLines joins a block's lines continued with a trailing backslash.
func logicalLines(body []string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range body {
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// readDoc reads a doc file.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
