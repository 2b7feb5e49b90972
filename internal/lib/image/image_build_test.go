//go:build image

package image

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// binary is the static kcedar `make image-test` built; without it the test
// builds one (CGO_ENABLED=0 GOOS=linux).
var binary = flag.String("binary", "", "static kcedar binary for linux/GOARCH; empty: build one")

// The image of the real binary, read back: the binary extracted from it runs
// without anything else from an image (kcedar version). Behind the image
// build tag, run by `make image-test`: it builds and runs the whole binary.
func TestArchiveOfTheBinaryRuns(t *testing.T) {
	bin := *binary
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kcedar")
		build := exec.Command("go", "build", "-o", bin, "github.com/kcedar/kcedar/cmd/kcedar")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, bin, runtime.GOARCH)
	got, err := FileFrom(back, "/kcedar")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("/kcedar in the image differs from the binary")
	}
	extracted := filepath.Join(t.TempDir(), "extracted")
	if err := os.WriteFile(extracted, got, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(extracted, "version").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("kcedar")) {
		t.Fatalf("kcedar version from the image: %v\n%s", err, out)
	}
}
