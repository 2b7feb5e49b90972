package docs

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadE2EBlocks pins what a marker marks: the next fence only, across
// blank lines, and never a fence that follows a marked one directly.
func TestReadE2EBlocks(t *testing.T) {
	doc := strings.Join([]string{
		"Make the certificates:",
		"",
		"<!-- e2e: certs -->",
		"",
		"```sh",
		"openssl req -x509 \\",
		"  -out ca.crt",
		"```",
		"```sh",
		"echo not marked: the marker above is for the block before",
		"```",
		"<!-- e2e file: dir/kustomization.yaml -->",
		"````yaml",
		"resources: [../base]",
		"```",
		"````",
		"<!-- e2e: empty -->",
		"```sh",
		"```",
		"<!-- e2e: not-a-marker -->  text after it",
		"```sh",
		"echo not marked either",
		"```",
	}, "\n")
	got := readE2EBlocksOf(t, doc)
	wantCommands := map[string]string{
		"certs": "openssl req -x509 \\\n  -out ca.crt\n",
		"empty": "",
	}
	wantFiles := map[string]string{"dir/kustomization.yaml": "resources: [../base]\n```\n"}
	if !maps.Equal(got.Commands, wantCommands) {
		t.Errorf("commands: got %q, want %q", got.Commands, wantCommands)
	}
	if !maps.Equal(got.Files, wantFiles) {
		t.Errorf("files: got %q, want %q", got.Files, wantFiles)
	}
}

// TestReadE2EBlocksRefusesTwoBlocksOfOneName checks that a name marks one
// block: a second would make the test run whichever came last.
func TestReadE2EBlocksRefusesTwoBlocksOfOneName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "<!-- e2e: a -->\n```sh\ntrue\n```\n\n<!-- e2e: a -->\n```sh\nfalse\n```\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadE2EBlocks(path); err == nil || !strings.Contains(err.Error(), `"<!-- e2e: a -->"`) {
		t.Fatalf("got error %v, want one naming the second marker", err)
	}
}

// readE2EBlocksOf writes doc to a file and reads its marked blocks.
func readE2EBlocksOf(t *testing.T, doc string) *E2EBlocks {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	blocks, err := ReadE2EBlocks(path)
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}
