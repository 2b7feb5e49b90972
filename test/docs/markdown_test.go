// Package docs checks the documentation against the code: every kcedar flag
// a doc names is one `kcedar ... --help` lists (flags_test.go), and every
// command block of the operator guides either runs in the e2e suite or is
// marked as an illustration (blocks_test.go).
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

// fence is one fenced code block of a Markdown file.
type fence struct {
	line int    // the line of the opening fence, from 1
	lang string // the info string's first word: "sh", "yaml", ""
	body []string
	// before is the nearest non-blank line above the opening fence.
	before string
}

var fenceOpen = regexp.MustCompile("^\\s*(```+)\\s*([A-Za-z0-9_+-]*)")

// parseMarkdown splits a Markdown text into its fenced code blocks and the
// prose outside them (fences blanked, so inline code can be found in it).
func parseMarkdown(text string) (fences []fence, prose string) {
	lines := strings.Split(text, "\n")
	var out []string
	var cur *fence
	var marker, lastNonBlank string
	for i, l := range lines {
		if cur != nil {
			if strings.TrimSpace(l) == marker {
				fences, cur = append(fences, *cur), nil
			} else {
				cur.body = append(cur.body, l)
			}
			out = append(out, "")
			continue
		}
		if m := fenceOpen.FindStringSubmatch(l); m != nil {
			cur, marker = &fence{line: i + 1, lang: m[2], before: lastNonBlank}, m[1]
			out = append(out, "")
			continue
		}
		if strings.TrimSpace(l) != "" {
			lastNonBlank = strings.TrimSpace(l)
		}
		out = append(out, l)
	}
	return fences, strings.Join(out, "\n")
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
