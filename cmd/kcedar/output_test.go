package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// writeOutput replaces regular files atomically and writes anything else
// in place: a device or a FIFO stays what it is.
func TestWriteOutputNeverReplacesSpecialFiles(t *testing.T) {
	data := []byte("schema\n")

	// /dev/null stays a character device.
	if err := writeOutput(os.DevNull, data, nil); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(os.DevNull); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v %v", os.DevNull, info.Mode(), err)
	}

	// A FIFO stays a FIFO, and its reader gets the data.
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	if err := writeOutput(fifo, data, nil); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("FIFO reader got %q", b)
	}
	if info, err := os.Lstat(fifo); err != nil || info.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", info.Mode(), err)
	}

	// "-" and "" write to w.
	var buf bytes.Buffer
	if err := writeOutput("-", data, &buf); err != nil || buf.String() != string(data) {
		t.Fatalf("-: %v %q", err, buf.String())
	}

	// A regular file is replaced (keeping its mode); a symlink stays a
	// symlink to the written file; a directory is refused.
	file := filepath.Join(dir, "out.json")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeOutput(file, data, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, data) {
		t.Fatalf("regular file: %q", b)
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600 kept", info.Mode().Perm())
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("out.json", link); err != nil {
		t.Fatal(err)
	}
	if err := writeOutput(link, []byte("via link\n"), nil); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Lstat(link); info.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if b, _ := os.ReadFile(file); string(b) != "via link\n" {
		t.Fatalf("link target: %q", b)
	}
	if err := writeOutput(dir, data, nil); err == nil {
		t.Fatal("a directory was accepted")
	}
	newFile := filepath.Join(dir, "new.json")
	if err := writeOutput(newFile, data, nil); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(newFile); info.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode %v", info.Mode().Perm())
	}
}
