package docs

import (
	"path/filepath"
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

// e2eRunners are the docs with blocks marked for an e2e test (see
// e2eMarker), each with the test that runs them by name.
var e2eRunners = map[string]string{
	"deploy.md":            "test/e2e/deploy_test.go",
	"reviewing-changes.md": "test/e2e/replay_setup_test.go",
}

// TestCommandBlocksRunOrAreIllustrations checks that every command block
// (a fence tagged sh, bash, shell or console, or an untagged one whose first
// line is a "$ " prompt) of the operator guides is either run by the e2e
// suite (the line right above its fence is an e2eMarker its runner's test
// names) or marked as an illustration: the line right above its fence is
// illustrationMarker. A reader thus knows that every command of a guide
// either ran against a real kube-apiserver or is said not to have.
func TestCommandBlocksRunOrAreIllustrations(t *testing.T) {
	for _, doc := range runDocs {
		fences, _ := parseMarkdown(readDoc(t, filepath.Join(root, "docs", doc)))
		for _, f := range fences {
			first := ""
			if len(f.body) > 0 {
				first = strings.TrimSpace(f.body[0])
			}
			if f.before != illustrationMarker && !e2eMarker.MatchString(f.before) && isCommandBlock(f.lang, first) {
				t.Errorf("docs/%s:%d: a command block that does not run in e2e: mark it %s on the line before (see test/docs/blocks_test.go)", doc, f.line, illustrationMarker)
			}
		}
	}
}

// TestE2EMarkersAreRunAndOutsideTheBlocks checks every doc's e2e markers:
// each is in a doc of e2eRunners and names a block its test runs, and no
// block carries a marker inside it, where operators would copy it.
func TestE2EMarkersAreRunAndOutsideTheBlocks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		doc := filepath.Base(path)
		fences, _ := parseMarkdown(readDoc(t, path))
		for _, f := range fences {
			for i, l := range f.body {
				if staleE2EMarker.MatchString(strings.TrimSpace(l)) {
					t.Errorf("docs/%s:%d: an e2e marker inside a block: put it as <!-- e2e: NAME --> on the line before the fence", doc, f.line+1+i)
				}
			}
			m := e2eMarker.FindStringSubmatch(f.before)
			if m == nil {
				continue
			}
			runner, ok := e2eRunners[doc]
			switch {
			case !ok:
				t.Errorf("docs/%s:%d: no e2e test runs this doc's blocks (e2eRunners); mark this one %s", doc, f.line, illustrationMarker)
			case !strings.Contains(readDoc(t, filepath.Join(root, runner)), `"`+m[2]+`"`):
				t.Errorf("docs/%s:%d: block %q is marked e2e, but %s never runs it", doc, f.line, m[2], runner)
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
