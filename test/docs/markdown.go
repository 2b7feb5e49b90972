// Package docs checks the documentation against the code: every kcedar flag
// a doc names is one `kcedar ... --help` lists (flags_test.go), and every
// command block of the operator guides either runs in the e2e suite or is
// marked as an illustration (blocks_test.go). It also finds, for the e2e
// tests, the blocks a doc marks for them to run (ReadE2EBlocks).
package docs

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// fence is one fenced code block of a Markdown file.
type fence struct {
	line int    // the line of the opening fence, from 1
	lang string // the info string's first word: "sh", "yaml", ""
	body []string
	// before is the nearest non-blank line above the opening fence, "" when
	// that is the closing fence of the block before.
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
				fences, cur, lastNonBlank = append(fences, *cur), nil, ""
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

// e2eMarker is the HTML comment on the line right above a block's opening
// fence that names the block for an e2e test: `<!-- e2e: NAME -->` marks
// commands the test runs by NAME, `<!-- e2e file: PATH -->` a file it writes
// at PATH as it is. The rendered page does not show it, so the block an
// operator copies holds only the commands.
var e2eMarker = regexp.MustCompile(`^<!-- e2e( file)?: (\S+) -->$`)

// staleE2EMarker is the convention before e2eMarker: the marker as the
// block's first line, where operators copy it with the commands.
var staleE2EMarker = regexp.MustCompile(`^# e2e(?: file)?:`)

// E2EBlocks are the blocks of one doc that its e2e test runs.
type E2EBlocks struct {
	// Commands are the `<!-- e2e: NAME -->` blocks by NAME.
	Commands map[string]string
	// Files are the `<!-- e2e file: PATH -->` blocks by PATH.
	Files map[string]string
}

// ReadE2EBlocks reads the Markdown file at path and returns its marked
// blocks, each body with a newline after every line. Two blocks marked
// alike are an error.
func ReadE2EBlocks(path string) (*E2EBlocks, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fences, _ := parseMarkdown(string(data))
	blocks := &E2EBlocks{Commands: map[string]string{}, Files: map[string]string{}}
	for _, f := range fences {
		m := e2eMarker.FindStringSubmatch(f.before)
		if m == nil {
			continue
		}
		into := blocks.Commands
		if m[1] != "" {
			into = blocks.Files
		}
		if _, dup := into[m[2]]; dup {
			return nil, fmt.Errorf("%s:%d: a second block marked %q", path, f.line, f.before)
		}
		var body strings.Builder
		for _, l := range f.body {
			body.WriteString(l + "\n")
		}
		into[m[2]] = body.String()
	}
	return blocks, nil
}
