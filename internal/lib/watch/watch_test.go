package watch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// run starts what Run runs, with a poll interval far longer than the test, so only
// file system events can trigger it.
func run(t *testing.T, paths ...string) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	loop := setup(ctx, paths, time.Hour, quiet()) // the watches are registered when it returns
	go func() {
		loop(func() { ch <- struct{}{} })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

func expect(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no trigger after %s", what)
	}
	// Drain the burst.
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileRewrittenAndRenamedOver(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	write(t, file, "a")
	ch := run(t, file)
	write(t, file, "b")
	expect(t, ch, "an in-place write")
	write(t, file+".tmp", "c")
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "an atomic rename")
	// The watch survives the rename (it is on the directory).
	write(t, file, "d")
	expect(t, ch, "a write after the rename")
}

func TestUnrelatedFilesInTheParentDoNotTrigger(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	write(t, file, "a")
	ch := run(t, file)
	write(t, filepath.Join(dir, "other.log"), "x")
	select {
	case <-ch:
		t.Fatal("a write to another file in the directory triggered")
	case <-time.After(300 * time.Millisecond):
	}
}

func TestDirectoryTreeAndConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	// A kubelet atomic-writer volume: team.cedar -> ..data/team.cedar,
	// ..data -> ..v1.
	if err := os.MkdirAll(filepath.Join(dir, "..v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "..v1", "team.cedar"), "v1")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "team.cedar"), filepath.Join(dir, "team.cedar")); err != nil {
		t.Fatal(err)
	}
	ch := run(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "..v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "..v2", "team.cedar"), "v2")
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "a ..data swap")
	// A new subdirectory and a file in it.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "a new subdirectory")
	write(t, filepath.Join(sub, "x.cedar"), "x")
	expect(t, ch, "a file in the new subdirectory")
}

func TestPollingFallback(t *testing.T) {
	// A path whose directory does not exist cannot be watched: polling
	// still calls fn.
	ch := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go Run(ctx, []string{filepath.Join(t.TempDir(), "missing", "p.cedar")}, 10*time.Millisecond, quiet(), func() { ch <- struct{}{} })
	for i := 0; i < 3; i++ {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no poll")
		}
	}
}
