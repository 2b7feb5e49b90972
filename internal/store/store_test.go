package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// In place: the settle tests (store_settle_test.go) simulate in-place
	// writers with it; the store's settle window and empty-set refusal keep
	// a watcher from loading a half-written file.
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func policy(id string) string {
	return fmt.Sprintf("@id(%q)\npermit(principal, action, resource is core::pods);\n", id)
}

func ids(ps *cedarlang.PolicySet) []string {
	if ps == nil {
		return nil
	}
	out := make([]string, len(ps.Policies))
	for i, p := range ps.Policies {
		out[i] = p.ID
	}
	return out
}

// recorder collects OnReload results.
type recorder struct {
	mu      sync.Mutex
	results []ReloadResult
}

func (r *recorder) record(res ReloadResult) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
}

func (r *recorder) last(t *testing.T) ReloadResult {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) == 0 {
		t.Fatal("OnReload was not called")
	}
	return r.results[len(r.results)-1]
}

func newStore(t *testing.T, paths []string, v Validator) (*Store, *recorder) {
	s := NewStore(paths, v, quietLogger())
	rec := &recorder{}
	s.OnReload = rec.record
	return s, rec
}

func TestStoreLoadsDirectoriesRecursively(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.cedar"), policy("b"))
	writeFile(t, filepath.Join(dir, "sub", "a.cedar"), policy("sub-a"))
	writeFile(t, filepath.Join(dir, "sub", "deeper", "c.cedar"), policy("deep-c")+policy("deep-c2"))
	writeFile(t, filepath.Join(dir, "README.md"), "not cedar (((")
	writeFile(t, filepath.Join(dir, "x.cedar.bak"), "not cedar (((")
	writeFile(t, filepath.Join(dir, ".hidden.cedar"), "not loaded (((")
	writeFile(t, filepath.Join(dir, ".git", "x.cedar"), "not loaded (((")
	writeFile(t, filepath.Join(dir, "sub", "..data", "x.cedar"), "not loaded (((")
	single := filepath.Join(t.TempDir(), "single.cedar")
	writeFile(t, single, policy("single"))

	s, rec := newStore(t, []string{dir, single}, nil)
	if s.Current() != nil {
		t.Fatal("a set before the first load")
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	want := []string{"b", "sub-a", "deep-c", "deep-c2", "single"} // sorted by path within a root, roots in order
	if got := ids(s.Current()); !slices.Equal(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if p, _ := s.Current().Get("sub-a"); p.Source != filepath.Join(dir, "sub", "a.cedar")+":1:1" {
		t.Fatalf("source %q", p.Source)
	}
	if r := rec.last(t); r.Err != nil || !r.Changed || r.Policies != 5 || s.Current().Generation != 1 {
		t.Fatalf("reload result %+v, generation %d", r, s.Current().Generation)
	}
}

func TestStoreRootThatIsASymlink(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "real", "p.cedar"), policy("p"))
	link := filepath.Join(base, "policies")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, []string{link}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// filepath.WalkDir does not enter a root that is a symlink: the store
	// must, or it silently serves an empty set.
	if got := ids(s.Current()); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("loaded %v", got)
	}
	if p, _ := s.Current().Get("p"); p.Source != filepath.Join(link, "p.cedar")+":1:1" {
		t.Fatalf("source %q, want it under the path given", p.Source)
	}
}

func TestStoreIgnoresOtherDataLinks(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.cedar"), policy("a"))
	writeFile(t, filepath.Join(dir, "sub", "b.cedar"), policy("b"))
	writeFile(t, filepath.Join(dir, "other", "c.cedar"), policy("c"))
	// Only kubelet-style "..<timestamp>" siblings are snapshots: a "..data"
	// leading up the tree must not send the walk round in circles.
	for link, target := range map[string]string{
		filepath.Join(dir, "sub", "..data"):   "..",
		filepath.Join(dir, "other", "..data"): dir,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.Current()); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Fatalf("loaded %v", got)
	}
}

// configMapVolume lays out a directory the way kubelet's atomic writer does
// for ConfigMap, Secret and projected volumes:
//
//	..2024_01_01_00_00_00.N/<files>   the snapshot
//	..data -> ..2024_01_01_00_00_00.N
//	<top-level name> -> ..data/<top-level name>
//
// and updates it the same way: new snapshot, ..data swapped by rename, new
// top-level links added, stale ones removed, the old snapshot removed.
type configMapVolume struct {
	t    testing.TB
	dir  string
	n    int
	prev string
	// window, if set, runs after ..data is swapped and before the top-level
	// links are brought up to date and the old snapshot is removed.
	window func()
}

func (v *configMapVolume) update(files map[string]string) {
	t := v.t
	v.n++
	ts := fmt.Sprintf("..2024_01_01_00_00_00.%09d", v.n)
	for name, content := range files {
		writeFile(t, filepath.Join(v.dir, ts, name), content)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.window != nil {
		v.window()
	}
	top := map[string]bool{}
	for name := range files {
		top[strings.Split(name, "/")[0]] = true
	}
	for name := range top {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !top[e.Name()] {
			if err := os.Remove(filepath.Join(v.dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v.prev != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.prev)); err != nil {
			t.Fatal(err)
		}
	}
	v.prev = ts
}

func TestStoreConfigMapMount(t *testing.T) {
	dir := t.TempDir()
	vol := &configMapVolume{t: t, dir: dir}
	vol.update(map[string]string{
		"team.cedar":  policy("team"),
		"other.cedar": policy("other"),
		"notes.txt":   "ignored",
	})
	s, rec := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// Each policy once, although it is reachable as team.cedar, ..data/team.cedar
	// and ..2024.../team.cedar; named by the path users see.
	if got := ids(s.Current()); !slices.Equal(got, []string{"other", "team"}) {
		t.Fatalf("loaded %v", got)
	}
	if p, _ := s.Current().Get("team"); p.Source != filepath.Join(dir, "team.cedar")+":1:1" {
		t.Fatalf("source %q", p.Source)
	}

	// An update: team.cedar changes, other.cedar goes away, a file in a
	// subdirectory (ConfigMap items with a path) appears.
	var inWindow []string
	var windowErr error
	vol.window = func() {
		// Between the ..data swap and kubelet's clean-up, other.cedar is a
		// dangling link and sub/ has no top-level link yet: the snapshot
		// is complete all the same.
		windowErr = s.Load()
		inWindow = ids(s.Current())
	}
	vol.update(map[string]string{
		"team.cedar":     policy("team-v2"),
		"sub/more.cedar": policy("more"),
	})
	if windowErr != nil {
		t.Fatalf("load during the swap: %v", windowErr)
	}
	want := []string{"more", "team-v2"}
	if !slices.Equal(inWindow, want) {
		t.Fatalf("during the swap: %v, want %v", inWindow, want)
	}
	vol.window = nil
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.Current()); !slices.Equal(got, want) {
		t.Fatalf("after the swap: %v, want %v", got, want)
	}
	if r := rec.last(t); r.Changed || r.Err != nil {
		t.Fatalf("kubelet's clean-up changed nothing that is loaded, got %+v", r)
	}
	if p, _ := s.Current().Get("more"); p.Source != filepath.Join(dir, "sub", "more.cedar")+":1:1" {
		t.Fatalf("source %q", p.Source)
	}
	if s.Current().Generation != 2 {
		t.Fatalf("generation %d, want 2", s.Current().Generation)
	}
}

// A reload racing with kubelet's updates never serves a mix of two versions.
func TestStoreConfigMapMountNeverMixesVersions(t *testing.T) {
	dir := t.TempDir()
	vol := &configMapVolume{t: t, dir: dir}
	version := func(v int) map[string]string {
		return map[string]string{
			"a.cedar": policy(fmt.Sprintf("a-%d", v)),
			"b.cedar": policy(fmt.Sprintf("b-%d", v)),
		}
	}
	vol.update(version(0))
	s, _ := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var updates atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 1; ctx.Err() == nil; v++ {
			vol.update(version(v))
			updates.Add(1)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(2 * time.Second)
	loads := 0
	for i := 0; (i < 200 || updates.Load() < 200) && time.Now().Before(deadline); i++ {
		if err := s.Load(); err == nil {
			loads++
		}
		got := ids(s.Current())
		if len(got) != 2 || strings.TrimPrefix(got[0], "a-") != strings.TrimPrefix(got[1], "b-") {
			t.Fatalf("served a mix of versions: %v", got)
		}
	}
	t.Logf("%d successful loads during %d updates", loads, updates.Load())
}

func TestStoreUnchangedFilesAreNotReparsed(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.cedar"), policy("p"))
	v := &countingValidator{}
	s, rec := newStore(t, []string{dir}, v)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	first := s.Current()
	for i := 0; i < 3; i++ {
		if err := s.Load(); err != nil {
			t.Fatal(err)
		}
	}
	if s.Current() != first || first.Generation != 1 || v.calls.Load() != 1 {
		t.Fatalf("unchanged files: new set %v, generation %d, validated %d times", s.Current() != first, s.Current().Generation, v.calls.Load())
	}
	if r := rec.last(t); r.Changed || r.Err != nil || r.Policies != 1 {
		t.Fatalf("result %+v", r)
	}
	// Touching a file without changing it is no change either.
	now := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "p.cedar"), now, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil || s.Current() != first || rec.last(t).Changed {
		t.Fatalf("touched file: err %v, result %+v", err, rec.last(t))
	}
	// Renaming a file is a change (ids default to file:line:col).
	if err := os.Rename(filepath.Join(dir, "p.cedar"), filepath.Join(dir, "q.cedar")); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil || s.Current() == first || !rec.last(t).Changed || s.Current().Generation != 2 {
		t.Fatalf("renamed file: err %v, result %+v", err, rec.last(t))
	}
}

func TestStoreInvalidEditKeepsTheLastGoodSet(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("good"))
	v := &countingValidator{}
	s, rec := newStore(t, []string{dir}, v)
	if err := s.Load(); err != nil || s.LastError() != nil {
		t.Fatalf("load: %v, last error %v", err, s.LastError())
	}
	good := s.Current()

	writeFile(t, file, policy("good")+"\npermit(principal, action, resource) when { oops ];")
	err := s.Load()
	if err == nil {
		t.Fatal("invalid edit loaded")
	}
	if s.Current() != good {
		t.Fatal("the last good set was replaced")
	}
	if s.LastError() == nil || s.LastError().Error() != err.Error() || !strings.Contains(err.Error(), file+":4:") {
		t.Fatalf("LastError %v, Load error %v: want the file and line", s.LastError(), err)
	}
	if r := rec.last(t); r.Err == nil || !r.Changed || r.Policies != 1 {
		t.Fatalf("result %+v", r)
	}

	// A policy the validator refuses fails the same way. While the bad files
	// stay as they are, reloads report the same error without parsing and
	// validating them again (or logging it every interval).
	writeFile(t, file, policy("good")+policy("bad-policy"))
	err = s.Load()
	if err == nil || !strings.Contains(err.Error(), "bad-policy is refused") || s.Current() != good {
		t.Fatalf("validation failure: %v", err)
	}
	calls := v.calls.Load()
	for i := 0; i < 3; i++ {
		if err2 := s.Load(); err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("reload of the same bad files: %v", err2)
		}
		if r := rec.last(t); r.Err == nil || !r.Changed || r.Policies != 1 || s.LastError() == nil {
			t.Fatalf("result %+v, last error %v", r, s.LastError())
		}
	}
	if v.calls.Load() != calls {
		t.Fatalf("the same bad files were validated again (%d -> %d calls)", calls, v.calls.Load())
	}

	// Going back to the serving files clears the error without a new generation.
	writeFile(t, file, policy("good"))
	if err := s.Load(); err != nil || s.LastError() != nil || s.Current() != good {
		t.Fatalf("revert: %v, last error %v", err, s.LastError())
	}
	if r := rec.last(t); r.Err != nil || r.Changed {
		t.Fatalf("revert result %+v", r)
	}

	// A fix loads.
	writeFile(t, file, policy("better"))
	if err := s.Load(); err != nil || s.LastError() != nil || !slices.Equal(ids(s.Current()), []string{"better"}) || s.Current().Generation != 2 {
		t.Fatalf("fix: %v, %v", err, ids(s.Current()))
	}

	// The same bad files again after a good load fail again.
	writeFile(t, file, policy("good")+"\npermit(principal, action, resource) when { oops ];")
	if err := s.Load(); err == nil || s.LastError() == nil {
		t.Fatal("bad files accepted the second time")
	}
	// A file that disappears is an error too; the set keeps serving.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "dangling-target.cedar"), policy("t"))
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "link.cedar")); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "link.cedar") || s.Current().Generation != 2 {
		t.Fatalf("dangling link: %v", err)
	}
}

func TestStoreFirstLoadFailures(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.cedar"), `@id("x") permit(principal, action, resource);`)
	writeFile(t, filepath.Join(dir, "b.cedar"), `@id("x") forbid(principal, action, resource);`)
	s, rec := newStore(t, []string{dir}, nil)
	err := s.Load()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "a.cedar")+":1:1") || !strings.Contains(err.Error(), filepath.Join(dir, "b.cedar")+":1:1") {
		t.Fatalf("duplicate ids: %v", err)
	}
	if s.Current() != nil || s.LastError() == nil || rec.last(t).Policies != 0 {
		t.Fatal("a set after a failed first load")
	}

	// Errors of several files are all reported.
	writeFile(t, filepath.Join(dir, "a.cedar"), "permit(")
	writeFile(t, filepath.Join(dir, "b.cedar"), "forbid(")
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "a.cedar:") || !strings.Contains(err.Error(), "b.cedar:") {
		t.Fatalf("two bad files: %v", err)
	}

	big := filepath.Join(t.TempDir(), "big.cedar")
	writeFile(t, big, strings.Repeat(" ", cedarlang.MaxPolicyFileBytes+1))
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{nil, "no policy paths"},
		{[]string{filepath.Join(dir, "missing")}, "missing"},
		{[]string{big}, "big.cedar: larger than"},
	} {
		s := NewStore(tc.paths, nil, quietLogger())
		if err := s.Load(); err == nil || !strings.Contains(err.Error(), tc.want) || s.Current() != nil {
			t.Errorf("%v: %v, want %q", tc.paths, err, tc.want)
		}
	}
}

func TestStoreValidatorErrorsFailTheLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, `@id("ok") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "a" };`)
	sv, err := cedarlang.NewSchemaValidator(schematest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, []string{dir}, sv)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// Nodes are cluster-scoped: no namespace attribute.
	writeFile(t, file, `@id("ok") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "a" };
@id("bad") permit(principal, action == k8s::Action::"get", resource is core::nodes) when { resource.namespace == "a" };`)
	err = s.Load()
	if err == nil || !strings.Contains(err.Error(), "policy bad") || !strings.Contains(err.Error(), file+":2:1") {
		t.Fatalf("validation error: %v", err)
	}
	if got := ids(s.Current()); !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("serving %v", got)
	}

	// Any Validator's errors fail the load.
	s2, _ := newStore(t, []string{dir}, validatorFunc(func(ps []*cedarlang.Policy) []error {
		return []error{errors.New("first"), errors.New("second")}
	}))
	if err := s2.Load(); err == nil || !strings.Contains(err.Error(), "first") || !strings.Contains(err.Error(), "second") || s2.Current() != nil {
		t.Fatalf("validator errors: %v", err)
	}
}

func TestStoreWatchPicksUpChanges(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	writeFile(t, file, policy("v1"))
	s, rec := newStore(t, []string{dir}, nil)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan struct{}, 1)
	s.OnReload = func(r ReloadResult) {
		rec.record(r)
		select {
		case loaded <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Watch(ctx, 10*time.Millisecond); close(done) }()

	// cond is checked after every load (on a file system event or a poll).
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for !cond() {
			select {
			case <-loaded:
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	writeFile(t, file, policy("v2"))
	waitFor("the change", func() bool { return slices.Equal(ids(s.Current()), []string{"v2"}) })
	writeFile(t, file, "permit(")
	waitFor("the error", func() bool { return s.LastError() != nil })
	if !slices.Equal(ids(s.Current()), []string{"v2"}) {
		t.Fatal("bad edit replaced the set")
	}
	writeFile(t, filepath.Join(dir, "new.cedar"), policy("new"))
	writeFile(t, file, policy("v3"))
	waitFor("the fix", func() bool { return s.LastError() == nil && len(ids(s.Current())) == 2 })

	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}

type countingValidator struct{ calls atomic.Int64 }

// Validate refuses policies whose id starts with "bad".
func (v *countingValidator) Validate(ps []*cedarlang.Policy) []error {
	v.calls.Add(1)
	var errs []error
	for _, p := range ps {
		if strings.HasPrefix(p.ID, "bad") {
			errs = append(errs, fmt.Errorf("%s: policy %s is refused", p.Source, p.ID))
		}
	}
	return errs
}

type validatorFunc func([]*cedarlang.Policy) []error

func (f validatorFunc) Validate(ps []*cedarlang.Policy) []error { return f(ps) }

// A poll that finds every file as the serving read left it reads nothing;
// every kind of change is still seen: an in-place rewrite of the same size
// with the modification time set back, a new file, other sources, and a
// change right after a read (the "racy" second, when a status alone does not
// prove the content unchanged).
func TestStoreUnchangedPollReadsNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.cedar")
	writeFile(t, p, policy("p1"))
	s, _ := newStore(t, []string{dir}, nil)
	// A read a second after the writes before it, without waiting: later
	// sets the store's clock ahead of the file system's, a write (write)
	// sets it back, so the next read is in the racy second again.
	var ahead time.Duration
	s.now = func() time.Time { return time.Now().Add(ahead) }
	later := func() { ahead = 1100 * time.Millisecond }
	write := func(path, text string) {
		ahead = 0
		writeFile(t, path, text)
	}
	load := func(what string, wantReads uint64, wantIDs ...string) {
		t.Helper()
		before := s.FileReads()
		if err := s.Load(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := s.FileReads() - before; got != wantReads {
			t.Fatalf("%s: %d reads, want %d", what, got, wantReads)
		}
		if got := ids(s.Current()); !slices.Equal(got, wantIDs) {
			t.Fatalf("%s: policies %v, want %v", what, got, wantIDs)
		}
	}
	// A file changed less than a second before the read is read again.
	load("first load", 1, "p1")
	load("poll in the racy second", 1, "p1")
	later()
	load("poll after the racy second", 1, "p1")
	load("unchanged", 0, "p1")
	load("unchanged again", 0, "p1")

	// Same size, modification time set back: the change time still moves.
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	write(p, policy("p2"))
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	load("same-size rewrite with the old mtime", 1, "p2")
	later()
	load("settled", 1, "p2")
	load("unchanged after the rewrite", 0, "p2")

	write(filepath.Join(dir, "sub", "q.cedar"), policy("q"))
	load("new file", 1, "p2", "q")
	later()
	load("settled", 1, "p2", "q")
	load("unchanged with two files", 0, "p2", "q")

	s.SetSources([]Source{{Name: "CedarPolicy/r", Data: []byte(policy("r"))}})
	load("new source", 1, "p2", "q", "r")
	load("unchanged files and sources", 0, "p2", "q", "r")

	if err := os.Remove(filepath.Join(dir, "sub", "q.cedar")); err != nil {
		t.Fatal(err)
	}
	load("removed file", 1, "p2", "r")
}
