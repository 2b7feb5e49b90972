package image

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeStaticELF writes a file that passes for a static ELF executable (an
// ELF header, no interpreter): the image package never runs it. The real
// binary's round trip is TestArchiveOfTheBinaryRuns (build tag image).
func fakeStaticELF(t *testing.T) string {
	t.Helper()
	b := append([]byte("\x7fELF\x02\x01\x01"), bytes.Repeat([]byte{0}, 57)...)
	b = append(b, "the rest of kcedar"...)
	f := filepath.Join(t.TempDir(), "kcedar")
	if err := os.WriteFile(f, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// roundTrip builds the image of bin, writes it as `make image` does, reads
// it back and checks its config and layers.
func roundTrip(t *testing.T, bin, arch string) v1.Image {
	t.Helper()
	img, err := Build(Options{Binary: bin, Arch: arch, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "kcedar-image.tar")
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
	if !slices.Equal(cf.Config.Entrypoint, []string{"/kcedar"}) || cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Architecture != arch {
		t.Fatalf("config: entrypoint %v user %q os %q arch %q", cf.Config.Entrypoint, cf.Config.User, cf.OS, cf.Architecture)
	}
	if layers, err := back.Layers(); err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1 (no base image)", len(layers), err)
	}
	// Same binary, same image.
	again, err := Build(Options{Binary: bin, Arch: arch, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("image digest not reproducible: %s vs %s", d1, d2)
	}
	return back
}

// The image `make image` writes, read back: entrypoint, user, one layer,
// the binary's bytes at /kcedar, the same digest for the same binary.
func TestArchiveRoundTrip(t *testing.T) {
	bin := fakeStaticELF(t)
	back := roundTrip(t, bin, "arm64")
	got, err := FileFrom(back, "/kcedar")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := os.ReadFile(bin); !bytes.Equal(got, want) {
		t.Fatal("/kcedar in the image differs from the binary")
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
