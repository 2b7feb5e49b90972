package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
)

// Packing the policy library and unpacking it gives the same files back.
func TestPolicyPackUnpackRoundTrip(t *testing.T) {
	src := "../../policies/library"
	var out bytes.Buffer
	if err := packDir(&out, src, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kind: CedarPolicy") {
		t.Fatalf("no CedarPolicy in:\n%s", out.String()[:min(500, out.Len())])
	}
	dst := t.TempDir()
	if _, err := unpackTo(&out, dst); err != nil {
		t.Fatal(err)
	}
	want, err := lint.ReadPaths([]string{src})
	if err != nil || len(want) == 0 {
		t.Fatalf("%d files: %v", len(want), err)
	}
	for _, f := range want {
		rel, _ := filepath.Rel(src, f.Name)
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Fatalf("%s did not round-trip: %v", rel, err)
		}
	}
}

func TestPolicyUnpackRefusesEscapes(t *testing.T) {
	in := "apiVersion: kcedar.dev/v1alpha1\nkind: CedarPolicy\nmetadata:\n  name: x\n  annotations:\n    kcedar.dev/source-file: ../../etc/evil.cedar\nspec:\n  content: permit(principal, action, resource);\n"
	if _, err := unpackTo(strings.NewReader(in), t.TempDir()); err == nil {
		t.Fatal("a path outside the directory was written")
	}
	var out bytes.Buffer
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a_b.cedar"), []byte("permit(principal, action, resource);"), 0o644)
	os.WriteFile(filepath.Join(dir, "a-b.cedar"), []byte("permit(principal, action, resource);"), 0o644)
	if err := packDir(&out, dir, ""); err == nil || !strings.Contains(err.Error(), "both become") {
		t.Fatalf("name collision: %v", err)
	}
}
