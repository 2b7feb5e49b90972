package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// illustrationMarker is the line right above a command block that the e2e
// suite does not run: pushing an image, kubectl commands the e2e kubectl
// does not do (rollout status, create token, config), files installed on a
// real node, command lines that need a cluster of their own. It is an HTML
// comment, so readers of the rendered page do not see it.
const illustrationMarker = "<!-- illustration -->"

// runDocs are the operator guides whose command blocks must each run in the
// e2e suite or be marked as an illustration.
var runDocs = []string{"deploy.md", "policy-objects.md", "rbac-migration.md", "access-reviews.md", "least-privilege.md"}

// e2eRunner is the doc whose "# e2e: NAME" blocks run, and the test that
// runs them by name.
const (
	e2eRunnerDoc  = "deploy.md"
	e2eRunnerTest = "test/e2e/deploy_test.go"
)

var e2eMarker = regexp.MustCompile(`^# e2e(?: file)?: (\S+)`)

// TestCommandBlocksRunOrAreIllustrations checks that every command block
// (a fence tagged sh, bash, shell or console, or an untagged one whose first
// line is a "$ " prompt) of the operator guides is either run by the e2e
// suite (deploy.md's "# e2e: NAME" blocks, which test/e2e/deploy_test.go
// names; a "# e2e file: PATH" block is a file it writes) or marked as an
// illustration: the line right above its fence is illustrationMarker. A
// reader thus knows that every command of a guide either ran against a real
// kube-apiserver or is said not to have.
func TestCommandBlocksRunOrAreIllustrations(t *testing.T) {
	runner := readDoc(t, filepath.Join(root, e2eRunnerTest))
	for _, doc := range runDocs {
		fences, _ := parseMarkdown(readDoc(t, filepath.Join(root, "docs", doc)))
		for _, f := range fences {
			first := ""
			if len(f.body) > 0 {
				first = strings.TrimSpace(f.body[0])
			}
			m := e2eMarker.FindStringSubmatch(first)
			switch {
			case m != nil && doc != e2eRunnerDoc:
				t.Errorf("docs/%s:%d: only %s's \"# e2e:\" blocks run; mark this one %s", doc, f.line, e2eRunnerDoc, illustrationMarker)
			case m != nil && !strings.Contains(runner, `"`+m[1]+`"`):
				t.Errorf("docs/%s:%d: block %q is marked e2e, but %s never runs it", doc, f.line, m[1], e2eRunnerTest)
			case m != nil, f.before == illustrationMarker:
			case isCommandBlock(f.lang, first):
				t.Errorf("docs/%s:%d: a command block that does not run in e2e: mark it %s on the line before (see test/docs/blocks_test.go)", doc, f.line, illustrationMarker)
			}
		}
	}
}

// isCommandBlock reports whether a fence of this language, whose first line
// is first, holds commands.
func isCommandBlock(lang, first string) bool {
	switch lang {
	case "sh", "bash", "shell", "console":
		return true
	case "":
		return strings.HasPrefix(first, "$ ")
	}
	return false
}
