package image

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// The image `make image` writes, read back: entrypoint, user and the binary
// itself, which must run (kcedar version).
func TestArchiveRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcedar")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kcedar")
	build := exec.Command("go", "build", "-o", bin, "github.com/kcedar/kcedar/cmd/kcedar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img, err := Build(Options{Binary: bin, Arch: runtime.GOARCH, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "kcedar-image.tar")
	if err := WriteArchive(img, archive, "kcedar:test"); err != nil {
		t.Fatal(err)
	}
	back, err := ReadArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/kcedar"}) || cf.Config.User != "65532:65532" || cf.OS != "linux" {
		t.Fatalf("config: entrypoint %v user %q os %q", cf.Config.Entrypoint, cf.Config.User, cf.OS)
	}
	layers, _ := back.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (no base image)", len(layers))
	}
	got, err := FileFrom(back, "/kcedar")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(got, want) {
		t.Fatal("/kcedar in the image differs from the binary")
	}
	// The extracted binary runs without anything else from an image.
	extracted := filepath.Join(dir, "extracted")
	if err := os.WriteFile(extracted, got, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(extracted, "version").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("kcedar")) {
		t.Fatalf("kcedar version from the image: %v\n%s", err, out)
	}
	// Same binary, same image.
	again, _ := Build(Options{Binary: bin, Arch: runtime.GOARCH, Version: "test"})
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("image digest not reproducible: %s vs %s", d1, d2)
	}
}

func TestRefusesDynamicBinaries(t *testing.T) {
	f := filepath.Join(t.TempDir(), "dyn")
	os.WriteFile(f, append([]byte("\x7fELF"), bytes.Repeat([]byte("/lib64/ld-linux-x86-64.so.2\x00"), 10)...), 0o755)
	if _, err := Build(Options{Binary: f}); err == nil {
		t.Fatal("a dynamically linked binary was accepted")
	}
	os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
	if _, err := Build(Options{Binary: f}); err == nil {
		t.Fatal("a script was accepted")
	}
}
