package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func forbidPolicy(id string) string {
	return "@id(\"" + id + "\")\nforbid(principal, action, resource is core::pods) when { resource.namespace == \"prod\" };\n"
}

// settleClock stands for the clock of a store's settle waits: a wait
// sleeps nothing, moves the clock by its length and then runs the writer's
// steps that were due by then, so the interleaving of writes and reads is
// exact and the time a load took is known.
type settleClock struct {
	t      *testing.T
	s      *Store
	now    time.Duration // the waits' total length
	sleeps int
	due    []dueStep // in order of at
}

type dueStep struct {
	at time.Duration
	do func()
}

// settleStore is a store with the default settle window whose waits move
// a settleClock instead of sleeping.
func settleStore(t *testing.T, paths []string) (*Store, *recorder, *settleClock) {
	s, rec := newStore(t, paths, nil)
	s.Settle = DefaultSettle
	c := &settleClock{t: t, s: s}
	s.sleep = c.sleep
	return s, rec, c
}

func (c *settleClock) sleep(d time.Duration) {
	if d <= 0 || d > c.s.Settle {
		c.t.Fatalf("waited %v, want at most the settle window %v", d, c.s.Settle)
	}
	c.now += d
	c.sleeps++
	for len(c.due) > 0 && c.due[0].at <= c.now {
		do := c.due[0].do
		c.due = c.due[1:]
		do()
	}
}

// after schedules do for when the waits have moved the clock d further.
func (c *settleClock) after(d time.Duration, do func()) {
	at := c.now + d
	i := len(c.due)
	for i > 0 && c.due[i-1].at > at {
		i--
	}
	c.due = slices.Insert(c.due, i, dueStep{at: at, do: do})
}

// load runs s.Load and says how long its waits took.
func (c *settleClock) load() (time.Duration, error) {
	start := c.now
	err := c.s.Load()
	return c.now - start, err
}

// inPlace opens path with O_TRUNC, as `cat >`, editors and copy tools do.
func inPlace(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func writeString(t *testing.T, f *os.File, s string) {
	t.Helper()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// An in-place writer that pauses between the first policy and the rest is
// never loaded half-written, and the complete file loads one settle window
// after its last write (within a settle step): the half file's status
// moves when the rest is written, the file is read again at once, and that
// read is taken when nothing moved for the window.
func TestStoreInPlaceWriterIsLoadedOnlyWhenComplete(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	old := policy("allow") + forbidPolicy("deny-prod")
	writeFile(t, file, old)
	s, rec, clock := settleStore(t, []string{dir})
	if took, err := clock.load(); err != nil || !slices.Equal(ids(s.Current()), []string{"allow", "deny-prod"}) || took != s.Settle {
		t.Fatalf("first load: %v %v after %v, want after one settle window", err, ids(s.Current()), took)
	}
	// The writer truncates and writes the permit only, then pauses 100 ms.
	const pause = 100 * time.Millisecond
	f := inPlace(t, file)
	writeString(t, f, policy("allow"))
	clock.after(pause, func() { writeString(t, f, forbidPolicy("deny-prod")+policy("new")); f.Close() })
	took, err := clock.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(s.Current()); !slices.Equal(got, []string{"allow", "deny-prod", "new"}) {
		t.Fatalf("serving %v after an in-place rewrite: a half-written file was loaded", got)
	}
	if step := settleStep(s.Settle); took < pause+s.Settle || took > pause+step+s.Settle {
		t.Fatalf("loaded %v after the rewrite began, want one settle window (%v) after its last write (%v), within a step (%v)", took, s.Settle, pause, step)
	}
	for _, r := range rec.results {
		if r.Err != nil {
			t.Fatalf("a reload failed: %+v", r)
		}
	}

	// Truncated to empty and left so: the empty read is stable, refused
	// (empty set), and the last good set serves.
	f = inPlace(t, file)
	f.Close()
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "--allow-empty-policy-set") {
		t.Fatalf("truncated file: %v", err)
	}
	if got := ids(s.Current()); len(got) != 3 {
		t.Fatalf("serving %v", got)
	}
	if at, err := s.LastFailure(); err == nil || at.IsZero() {
		t.Fatalf("LastFailure %v %v", err, at)
	}
}

// While the files stand still, the waits look at their status and read
// nothing: a load that waits out the window reads the source twice.
func TestStoreSettlesOnTheStatusAlone(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("a"))
	s, _, clock := settleStore(t, []string{file})
	reads := s.FileReads()
	if took, err := clock.load(); err != nil || took != s.Settle {
		t.Fatalf("load: %v after %v", err, took)
	}
	if n := s.FileReads() - reads; n != 2 || clock.sleeps != int(s.Settle/settleStep(s.Settle)) {
		t.Fatalf("%d reads and %d waits in one settle window, want 2 reads and %d waits", n, clock.sleeps, s.Settle/settleStep(s.Settle))
	}
}

// A writer that never stops gives up after ten windows of waiting, without
// a load or a reported failure; the serving set stays.
func TestStoreNeverSettlingFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("a"))
	s, rec := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	reports := len(rec.results)
	s.Settle = DefaultSettle
	var waited time.Duration
	n := 0
	s.sleep = func(d time.Duration) {
		waited += d
		n++
		writeFile(t, file, policy("a")+strings.Repeat("\n", n))
	}
	writeFile(t, file, policy("a")+policy("b"))
	if err := s.Load(); err != errUnsettled {
		t.Fatalf("Load: %v, want errUnsettled", err)
	}
	if waited != settleWindows*s.Settle || len(rec.results) != reports || !slices.Equal(ids(s.Current()), []string{"a"}) || s.LastError() != nil {
		t.Fatalf("waited %v, %d reports, serving %v, last error %v", waited, len(rec.results)-reports, ids(s.Current()), s.LastError())
	}
}

// A load waiting for the files to settle stops when its context ends (a
// shutdown), at the next step of the wait, without a load or a reported
// failure; the serving set stays.
func TestStoreLoadStopsWaitingWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("a"))
	s, rec := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	reports := len(rec.results)
	s.Settle = DefaultSettle
	ctx, cancel := context.WithCancel(t.Context())
	waits := 0
	s.sleep = func(time.Duration) {
		waits++
		if waits == 3 {
			cancel()
		}
		writeFile(t, file, policy("a")+strings.Repeat("\n", waits)) // never settles
	}
	writeFile(t, file, policy("a")+policy("b"))
	if err := s.LoadContext(ctx); err != context.Canceled {
		t.Fatalf("LoadContext: %v, want context.Canceled", err)
	}
	if waits != 3 || len(rec.results) != reports || !slices.Equal(ids(s.Current()), []string{"a"}) || s.LastError() != nil {
		t.Fatalf("%d waits, %d reports, serving %v, last error %v; want 3 waits and nothing else", waits, len(rec.results)-reports, ids(s.Current()), s.LastError())
	}
}

// Atomic renames and kubelet ..data swaps take effect without waiting.
func TestStoreAtomicWritesTakeEffectAtOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("v1"))
	s, _, clock := settleStore(t, []string{file})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// A file written earlier and renamed into place: its change time (the
	// rename) is later than its modification time (the last write).
	renameInto(t, file, policy("v2"))
	if took, err := clock.load(); err != nil || !slices.Equal(ids(s.Current()), []string{"v2"}) || took != 0 {
		t.Fatalf("after a rename: %v %v, waited %v", err, ids(s.Current()), took)
	}
	// An in-place rewrite of the same file waits one window.
	writeFile(t, file, policy("v3"))
	if took, err := clock.load(); err != nil || !slices.Equal(ids(s.Current()), []string{"v3"}) || took != s.Settle {
		t.Fatalf("in-place rewrite: %v %v, waited %v", err, ids(s.Current()), took)
	}

	// A ConfigMap volume: a ..data swap takes effect at once, including a
	// file that disappears with it.
	cm := t.TempDir()
	vol := &configMapVolume{t: t, dir: cm}
	vol.update(map[string]string{"a.cedar": policy("a1"), "b.cedar": policy("b1")})
	s2, _, clock2 := settleStore(t, []string{cm})
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	vol.update(map[string]string{"a.cedar": policy("a2")})
	if took, err := clock2.load(); err != nil || !slices.Equal(ids(s2.Current()), []string{"a2"}) || took != 0 {
		t.Fatalf("..data swap: %v %v, waited %v", err, ids(s2.Current()), took)
	}
}

// renameInto writes content to a temporary file beside path, dated a
// minute back, and renames it over path: its change time (the rename) is
// later than its modification time, whatever the clock's resolution.
func renameInto(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	writeFile(t, tmp, content)
	past := time.Now().Add(-time.Minute)
	if err := os.Chtimes(tmp, past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A file removed from a directory outside a snapshot swap waits too (it may
// be the first step of a multi-file edit), and a file added meanwhile
// starts the window over.
func TestStoreRemovalSettles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.cedar"), policy("a"))
	writeFile(t, filepath.Join(dir, "b.cedar"), policy("b"))
	s, _, clock := settleStore(t, []string{dir})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "b.cedar")); err != nil {
		t.Fatal(err)
	}
	const later = 50 * time.Millisecond
	clock.after(later, func() { writeFile(t, filepath.Join(dir, "c.cedar"), policy("c")) })
	took, err := clock.load()
	if step := settleStep(s.Settle); err != nil || !slices.Equal(ids(s.Current()), []string{"a", "c"}) || took < later+s.Settle || took > later+step+s.Settle {
		t.Fatalf("%v %v after %v", err, ids(s.Current()), took)
	}
}

func TestStoreEmptySet(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.cedar"), "// nothing yet\n")
	s, rec := newStore(t, []string{dir}, nil)
	err := s.Load()
	if err == nil || !strings.Contains(err.Error(), "no policies in "+dir) || !strings.Contains(err.Error(), "--allow-empty-policy-set") || s.Current() != nil {
		t.Fatalf("empty set: %v", err)
	}
	if r := rec.last(t); r.Err == nil || r.Repeat {
		t.Fatalf("result %+v", r)
	}
	if err := s.Load(); err == nil || !rec.last(t).Repeat {
		t.Fatalf("the same empty set again: %v %+v", err, rec.last(t))
	}
	// A directory without policy files is empty as well.
	empty := t.TempDir()
	s2, _ := newStore(t, []string{empty}, nil)
	if err := s2.Load(); err == nil || !strings.Contains(err.Error(), "no policies") {
		t.Fatalf("empty directory: %v", err)
	}
	s3, _ := newStore(t, []string{dir}, nil)
	s3.AllowEmpty = true
	if err := s3.Load(); err != nil || s3.Current() == nil || s3.Current().Len() != 0 {
		t.Fatalf("AllowEmpty: %v", err)
	}
	// Moving the only file away after a good load keeps the set serving.
	writeFile(t, filepath.Join(dir, "p.cedar"), policy("p"))
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "p.cedar"), filepath.Join(t.TempDir(), "p.cedar")); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err == nil || !slices.Equal(ids(s.Current()), []string{"p"}) || s.LastError() == nil {
		t.Fatalf("file moved away: %v %v", err, ids(s.Current()))
	}
}

func TestStoreShrinkGates(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	set := func(n int, forbid bool) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(policy("p" + string(rune('a'+i))))
		}
		if forbid {
			b.WriteString(forbidPolicy("f"))
		}
		return b.String()
	}
	writeFile(t, file, set(10, true))
	s, _ := newStore(t, []string{dir}, nil)
	s.MaxPolicyLoss = 0.5
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// 11 -> 5 removes 6 of 11 (55%): refused, naming the ids.
	writeFile(t, file, set(5, false))
	err := s.Load()
	if err == nil || !strings.Contains(err.Error(), "removes 6 of the 11") || !strings.Contains(err.Error(), "pf, pg") || !strings.Contains(err.Error(), "--max-policy-loss=0.5") {
		t.Fatalf("loss of 55%%: %v", err)
	}
	if s.Current().Len() != 11 {
		t.Fatal("the refused set serves")
	}
	// 11 -> 6 (5 of 11, 45%) loads; KeepForbids off, so the forbid may go.
	writeFile(t, file, set(6, false))
	if err := s.Load(); err != nil || s.Current().Len() != 6 {
		t.Fatalf("loss of 45%%: %v", err)
	}
	// KeepForbids refuses removing a forbid, whatever the share.
	writeFile(t, file, set(6, true))
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.KeepForbids = true
	writeFile(t, file, set(6, false)+policy("extra"))
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "removes 1 forbid policies") || !strings.Contains(err.Error(), ": f") {
		t.Fatalf("forbid removed: %v", err)
	}
	// Switching the forbid to audit mode removes it, for KeepForbids.
	writeFile(t, file, set(6, false)+"@enforcement(\"audit\")\n"+forbidPolicy("f"))
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "f (no longer an enforced forbid)") {
		t.Fatalf("forbid switched to audit: %v", err)
	}
	// Growing is never refused.
	writeFile(t, file, set(9, true))
	if err := s.Load(); err != nil || s.Current().Len() != 10 {
		t.Fatalf("growth: %v", err)
	}
	// Off (0): any loss loads.
	s.MaxPolicyLoss, s.KeepForbids = 0, false
	writeFile(t, file, set(1, false))
	if err := s.Load(); err != nil || s.Current().Len() != 1 {
		t.Fatalf("gates off: %v", err)
	}
}

func TestStoreHashAndRepeat(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("a"))
	s, rec := newStore(t, []string{dir}, nil)
	if s.Hash() != "" {
		t.Fatal("hash before a load")
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	h1 := s.Hash()
	if len(h1) != 64 || rec.last(t).Hash != h1 {
		t.Fatalf("hash %q, result %+v", h1, rec.last(t))
	}
	writeFile(t, file, "permit(")
	for i := 0; i < 3; i++ {
		_ = s.Load()
		if r := rec.last(t); r.Err == nil || r.Repeat != (i > 0) || r.Hash != h1 {
			t.Fatalf("attempt %d: %+v", i, r)
		}
	}
	// A read error (a file gone) counts once as well.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing"), file); err != nil {
		t.Fatal(err)
	}
	_ = s.Load()
	if r := rec.last(t); r.Err == nil || r.Repeat {
		t.Fatalf("new read error: %+v", r)
	}
	_ = s.Load()
	if r := rec.last(t); r.Err == nil || !r.Repeat {
		t.Fatalf("same read error: %+v", r)
	}
	os.Remove(file)
	writeFile(t, file, policy("b"))
	if err := s.Load(); err != nil || s.Hash() == h1 || rec.last(t).Hash != s.Hash() {
		t.Fatalf("new set: %v %q", err, s.Hash())
	}
}
