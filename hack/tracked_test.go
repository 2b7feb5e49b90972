// Package hack holds the build's scripts; its tests run them on throwaway
// git repositories.
package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// conflictSides is a merge conflict as git writes it into a file. The
// markers are built, not written out, so that this file holds none.
func conflictSides(ours, theirs string) string {
	return strings.Repeat("<", 7) + " HEAD\n" + ours + "\n" + strings.Repeat("=", 7) + "\n" + theirs + "\n" + strings.Repeat(">", 7) + " main\n"
}

// runCheckTracked runs check-tracked.sh in a fresh git repository holding
// files (path -> content), all tracked unless untracked names them; it
// returns the script's stderr and whether it passed.
func runCheckTracked(t *testing.T, files map[string]string, untracked ...string) (string, bool) {
	t.Helper()
	script, err := filepath.Abs("check-tracked.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(untracked, "\x00")+"\x00", name+"\x00") {
			git("add", "--", name)
		}
	}
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("running %s: %v", script, err)
		}
	}
	return stderr.String(), err == nil
}

// A tracked file holding a merge conflict fails the check, which names it
// and the marker's line; in any text file, whatever its kind, and with
// CRLF line ends or diff3's base section too.
func TestCheckTrackedFindsConflictMarkers(t *testing.T) {
	diff3 := strings.Repeat("<", 7) + " ours\r\na\r\n" + strings.Repeat("|", 7) + " base\r\nb\r\n" + strings.Repeat("=", 7) + "\r\nc\r\n" + strings.Repeat(">", 7) + " theirs\r\n"
	cases := map[string]string{
		"docs/architecture.md": "# Architecture\n\n" + conflictSides("tools a", "tools b"),
		"main.go":              "package main\n\n" + conflictSides("var x = 1", "var x = 2"),
		"crlf.txt":             diff3,
		"only-separator.md":    "kept\n" + strings.Repeat("=", 7) + "\nmerged by hand, the separator left\n",
		"only-theirs.yaml":     "a: 1\n" + strings.Repeat(">", 7) + " 1a2b3c4 (a commit)\n",
		"bare-ours.txt":        strings.Repeat("<", 7) + "\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			stderr, ok := runCheckTracked(t, map[string]string{name: content, "README.md": "fine\n"})
			if ok {
				t.Fatalf("passed with a conflict marker in %s", name)
			}
			if !strings.Contains(stderr, "merge conflict markers") || !strings.Contains(stderr, name+":") {
				t.Errorf("the failure does not name %s:\n%s", name, stderr)
			}
			if strings.Contains(stderr, "README.md") {
				t.Errorf("names a file without markers:\n%s", stderr)
			}
		})
	}
}

// Lines that only look like markers pass: setext heading underlines of
// other lengths than seven, eight or more '<' or '>', a marker that does
// not start its line, and a marker in an untracked file.
func TestCheckTrackedAllowsLookalikes(t *testing.T) {
	files := map[string]string{
		"docs/guide.md": "Title\n=====\n\nLonger title\n" + strings.Repeat("=", 12) + "\n\nSub\n---\n",
		"shift.go":      "package shift\n\n// " + strings.Repeat("<", 7) + " HEAD in a comment\nconst x = 1 << 7\n",
		"arrows.txt":    strings.Repeat("<", 8) + " not a marker\n" + strings.Repeat(">", 8) + "\n" + strings.Repeat("=", 7) + " text after it\n",
		"scratch.md":    conflictSides("a", "b"),
	}
	if stderr, ok := runCheckTracked(t, files, "scratch.md"); !ok {
		t.Fatalf("failed on lookalikes:\n%s", stderr)
	}
}
