//go:build linux

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// While watched, a file renamed into place loads at once, whether or not
// the rename fell in the tick of its last write; an in-place writer that
// follows still waits for its last write and the window, never loaded half
// written.
func TestStoreWitnessedRenamesTakeEffectAtOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("v0"))
	s, _, clock := settleStore(t, []string{dir})
	if _, err := clock.load(); err != nil {
		t.Fatal(err)
	}
	witnessing(t, s) // as Watch starts: the very next rename is witnessed
	sameTick := 0
	for i := range 40 {
		id := fmt.Sprintf("v%d", i+1)
		if quickRename(t, file, policy(id)+policy("other")) {
			sameTick++
		}
		if took, err := clock.load(); err != nil || !slices.Equal(ids(s.Current()), []string{id, "other"}) || took != 0 {
			t.Fatalf("rename %d: %v %v, waited %v; want it at once", i, err, ids(s.Current()), took)
		}
	}
	t.Logf("%d of 40 renames fell in the tick of their last write", sameTick)

	const pause = 100 * time.Millisecond
	f := inPlace(t, file)
	writeString(t, f, policy("half"))
	clock.after(pause, func() { writeString(t, f, forbidPolicy("rest")); f.Close() })
	took, err := clock.load()
	if err != nil || !slices.Equal(ids(s.Current()), []string{"half", "rest"}) {
		t.Fatalf("in-place writer after a rename: %v %v", err, ids(s.Current()))
	}
	if took < pause+s.Settle {
		t.Fatalf("in-place writer after a rename loaded after %v, want its last write (%v) and the window (%v)", took, pause, s.Settle)
	}
}

// The witness vouches only for a regular file with one link that arrived
// by a rename and was left alone: not a symlink renamed into place (its
// target is written elsewhere), not a second link of a file, not a renamed
// file written in place since, and nothing without a witness.
func TestStoreWitnessVouchesForSoleRenamedFilesOnly(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("v0"))
	s, _, _ := settleStore(t, []string{dir})
	arrived := func() bool {
		t.Helper()
		c := s.readCandidate()
		if c.err != nil {
			t.Fatal(c.err)
		}
		return c.meta[file].arrived
	}
	quickRename(t, file, policy("v1"))
	if arrived() {
		t.Fatal("vouched for without a witness")
	}
	witnessing(t, s)
	quickRename(t, file, policy("v2"))
	if !arrived() {
		t.Fatal("a file renamed into place is not vouched for")
	}
	writeFile(t, file, policy("v3"))
	if arrived() {
		t.Fatal("a renamed file written in place since is vouched for")
	}
	target := filepath.Join(elsewhere, "target.cedar")
	writeFile(t, target, policy("v4"))
	for _, way := range []struct {
		what string
		link func(target, name string) error
	}{{"a symlink", os.Symlink}, {"a file with another link", os.Link}} {
		link := filepath.Join(dir, ".link")
		if err := way.link(target, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(link, file); err != nil {
			t.Fatal(err)
		}
		if arrived() {
			t.Fatalf("%s renamed into place is vouched for", way.what)
		}
	}
}

// A file renamed in between a read's mark and the read itself cannot be
// counted by that read; the store reads it again at the next settle step
// and takes it then, not a window later.
func TestStoreRenameDuringTheReadIsTakenAtTheNextStep(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("v0"))
	s, _, clock := settleStore(t, []string{dir})
	if _, err := clock.load(); err != nil {
		t.Fatal(err)
	}
	witnessing(t, s)
	sameTick := false
	s.afterMark = func() {
		s.afterMark = nil
		sameTick = quickRename(t, file, policy("v1"))
	}
	took, err := clock.load()
	if err != nil || !slices.Equal(ids(s.Current()), []string{"v1"}) {
		t.Fatalf("%v %v", err, ids(s.Current()))
	}
	want := settleStep(s.Settle)
	if !sameTick {
		want = 0 // its times already say it was renamed
	}
	if took != want {
		t.Fatalf("loaded after %v, want %v (the rename in its last write's tick: %v)", took, want, sameTick)
	}
}
