package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWriteFileReplacesWholeAndKeepsNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.crt")
	if err := WriteFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("second"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "second" {
		t.Fatalf("read %q, %v; want second", got, err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file: %v", len(entries), entries)
	}
}

// A reader racing the writer sees no file or a whole one, never a part.
func TestReaderNeverSeesAPart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	whole := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB: many write calls' worth
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			if err := WriteFile(path, whole, 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reads := 0; ; reads++ {
		got, err := os.ReadFile(path)
		if err == nil && !bytes.Equal(got, whole) {
			t.Fatalf("read %d bytes, want none or all %d", len(got), len(whole))
		}
		select {
		case <-done:
			return
		default:
		}
	}
}

func TestWriteFileFailsInAMissingDirectory(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such"), nil, 0o644); err == nil {
		t.Fatal("wrote into a directory that does not exist")
	}
}
