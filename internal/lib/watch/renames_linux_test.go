//go:build linux

package watch

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func newRenames(t *testing.T, dirs ...string) *Renames {
	t.Helper()
	r := NewRenames()
	if r == nil {
		t.Fatal("no inotify instance")
	}
	t.Cleanup(r.Close)
	for _, d := range dirs {
		r.Watch(d)
	}
	return r
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// renameIn writes content to a temporary file in the directory other (which
// may be path's own) and renames it over path.
func renameIn(t *testing.T, path, other, content string) {
	t.Helper()
	tmp := filepath.Join(other, ".tmp-"+filepath.Base(path))
	mustDo(t, os.WriteFile(tmp, []byte(content), 0o644))
	mustDo(t, os.Rename(tmp, path))
}

// The witness against a model, over random sequences of what tools do to a
// few names: a name arrived by a rename exactly when the last thing done to
// it was a rename into place (from the same directory or another one), and
// not when it was written in place, appended to, created, removed, renamed
// away, or written through a descriptor opened before the rename.
func TestRenamesAgreeWithTheModel(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	r := newRenames(t, dir)
	rng := rand.New(rand.NewPCG(5, 9))
	names := []string{"a.cedar", "b.cedar", "c.cedar"}
	arrived := map[string]bool{}
	open := map[string]*os.File{} // a writer's descriptor, kept across a rename
	for step := range 400 {
		name := names[rng.IntN(len(names))]
		path := filepath.Join(dir, name)
		_, exists := os.Lstat(path)
		op := rng.IntN(8)
		if exists != nil && op != 0 && op != 1 && op != 2 {
			op = 0 // most operations need the file
		}
		switch op {
		case 0, 1:
			src := dir
			if op == 1 {
				src = other
			}
			renameIn(t, path, src, fmt.Sprint(step))
			arrived[name] = true
		case 2:
			mustDo(t, os.WriteFile(path, []byte("in place"), 0o644))
			arrived[name] = false
		case 3:
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			mustDo(t, err)
			_, err = f.WriteString("more")
			mustDo(t, err)
			mustDo(t, f.Close())
			arrived[name] = false
		case 4:
			mustDo(t, os.Remove(path))
			arrived[name] = false
		case 5:
			mustDo(t, os.Rename(path, filepath.Join(other, name)))
			arrived[name] = false
		case 6:
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			mustDo(t, err)
			if old := open[name]; old != nil {
				old.Close()
			}
			open[name] = f // written later, after whatever comes
		case 7:
			if f := open[name]; f != nil {
				// The descriptor may point at a file renamed away or
				// removed since: then the name is not concerned.
				st, err1 := f.Stat()
				cur, err2 := os.Stat(path)
				_, err := f.WriteString("late")
				mustDo(t, err)
				if err1 == nil && err2 == nil && os.SameFile(st, cur) {
					arrived[name] = false
				}
			}
		}
		mark := r.Mark()
		for _, n := range names {
			if got := r.Arrived(filepath.Join(dir, n), mark); got != arrived[n] {
				t.Fatalf("step %d (op %d on %s): Arrived(%s) = %v, want %v", step, op, name, n, got, arrived[n])
			}
		}
	}
	for _, f := range open {
		f.Close()
	}
}

// Arrived answers for renames before the mark only, and never for a
// directory not watched.
func TestRenamesBeforeTheMarkOnly(t *testing.T) {
	dir, unwatched := t.TempDir(), t.TempDir()
	r := newRenames(t, dir)
	path := filepath.Join(dir, "p.cedar")
	before := r.Mark()
	renameIn(t, path, dir, "x")
	after := r.Mark()
	if r.Arrived(path, before) {
		t.Fatal("a rename after the mark was taken as before it")
	}
	if !r.Arrived(path, after) {
		t.Fatal("a rename before the mark was not seen")
	}
	elsewhere := filepath.Join(unwatched, "p.cedar")
	renameIn(t, elsewhere, unwatched, "x")
	if r.Arrived(elsewhere, r.Mark()) {
		t.Fatal("a directory never watched was witnessed")
	}
	var none *Renames
	none.Watch(dir)
	none.Close()
	if none.Arrived(path, none.Mark()) {
		t.Fatal("a nil witness saw something")
	}
}

// A directory removed (or moved away) and made again under the same path is
// not witnessed until watched again; a closed witness sees nothing.
func TestRenamesForgetADirectoryThatWentAway(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "policies")
	mustDo(t, os.Mkdir(dir, 0o755))
	r := newRenames(t, dir)
	path := filepath.Join(dir, "p.cedar")
	renameIn(t, path, dir, "x")
	mustDo(t, os.Rename(dir, filepath.Join(parent, "old")))
	mustDo(t, os.Mkdir(dir, 0o755))
	renameIn(t, path, dir, "y")
	if r.Arrived(path, r.Mark()) {
		t.Fatal("a rename into a new directory under a moved one's path was witnessed")
	}
	r.Watch(dir)
	renameIn(t, path, dir, "z")
	if !r.Arrived(path, r.Mark()) {
		t.Fatal("the directory watched again is not witnessed")
	}
	r.Close()
	if r.Arrived(path, r.Mark()) {
		t.Fatal("a closed witness saw something")
	}
}

// A lost event (the kernel's queue overflowed) forgets every rename seen;
// a record cut short breaks the witness.
func TestRenamesForgetOnOverflow(t *testing.T) {
	dir := t.TempDir()
	r := newRenames(t, dir)
	path := filepath.Join(dir, "p.cedar")
	renameIn(t, path, dir, "x")
	if !r.Arrived(path, r.Mark()) {
		t.Fatal("rename not seen")
	}
	r.mu.Lock()
	r.takeEvents(inotifyRecord(-1, syscall.IN_Q_OVERFLOW, ""))
	r.mu.Unlock()
	if r.Arrived(path, r.Mark()) {
		t.Fatal("a rename was still witnessed after events were lost")
	}
	renameIn(t, path, dir, "y")
	if !r.Arrived(path, r.Mark()) {
		t.Fatal("a rename after the overflow was not seen")
	}
	r.mu.Lock()
	r.takeEvents(inotifyRecord(r.dirs[dir], syscall.IN_MOVED_TO, "q.cedar")[:inotifyHeader+2])
	r.mu.Unlock()
	if r.Arrived(path, r.Mark()) {
		t.Fatal("a witness given a cut record still answers")
	}
}

func inotifyRecord(wd int32, mask uint32, name string) []byte {
	b := make([]byte, inotifyHeader, inotifyHeader+16)
	size := 0
	if name != "" {
		size = 16
	}
	binary.NativeEndian.PutUint32(b[0:4], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:8], mask)
	binary.NativeEndian.PutUint32(b[12:16], uint32(size))
	if size > 0 {
		b = append(b, make([]byte, size)...)
		copy(b[inotifyHeader:], name)
	}
	return b
}
