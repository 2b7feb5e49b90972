package policies_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/format"
)

// Every example policy is in kcedar fmt's style (`kcedar fmt -w policies/`).
func TestExamplesAreFormatted(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cedar") {
			return err
		}
		n++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		res, err := format.Source(path, src)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		} else if res.Changed(src) {
			t.Errorf("%s is not formatted: run kcedar fmt -w %s", path, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d example policy files found", n)
	}
}
