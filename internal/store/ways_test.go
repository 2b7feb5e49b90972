package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/lib/watch"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// wayOfWriting is how a tool writes a change to a policy file or object.
type wayOfWriting int

const (
	// byRename: written to a temporary file and renamed over the file
	// (editors, GitOps tools, kubelet) in a later tick of the file system's
	// clock than its last write (its change time after its modification
	// time: the store takes it at once).
	byRename wayOfWriting = iota
	// inPlaceOneWrite: opened with O_TRUNC and written in one write (cp,
	// shell redirection, kubectl cp).
	inPlaceOneWrite
	// inPlacePieces: opened with O_TRUNC and written in several writes less
	// than a settle window apart (an editor flushing its buffer); the store
	// reads the file between them.
	inPlacePieces
	// byAppend: the new policy appended with O_APPEND.
	byAppend
	// byObject: a policy object updated (Store.SetSources).
	byObject
	// inPlaceStalled: opened with O_TRUNC, written up to the middle of a
	// policy, left so for longer than the settle window (the half file is
	// loaded, and fails), then written to the end.
	inPlaceStalled
	// byQuickRename: written to a temporary file and renamed over the file
	// at once, its times as the kernel left them. A rename within the clock
	// tick of the last write (most are) leaves the change time equal to the
	// modification time: the rename witness tells it from a file written in
	// place, and the store takes it at once; without the witness the store
	// cannot, and waits the settle window.
	byQuickRename
	waysOfWriting
)

func (w wayOfWriting) String() string {
	return [...]string{"rename", "in place, one write", "in place, in pieces", "append", "policy object", "in place, stalled", "rename, times as written"}[w]
}

// waysSource is policy files in a directory and policy objects, changed one
// policy at a time: each file and object a list of policy texts.
type waysSource struct {
	t       *testing.T
	rng     *rand.Rand
	pool    []string
	files   map[string][]string // by path
	objects []waysObject
	next    int
}

// waysObject is a policy object: a cluster-scoped one (no namespace), or
// a namespaced one (permits only).
type waysObject struct {
	name, namespace string
	blocks          []string
}

func newWaysSource(t *testing.T, dir string, seed uint64) *waysSource {
	var blocks []string
	for _, b := range strings.SplitAfter(zoo.Policies(700, seed), "\n\n") {
		if strings.TrimSpace(b) != "" {
			blocks = append(blocks, b)
		}
	}
	w := &waysSource{t: t, rng: rand.New(rand.NewPCG(seed, 7)), files: map[string][]string{}}
	for i := range 4 {
		path := filepath.Join(dir, fmt.Sprintf("f%d.cedar", i))
		w.files[path] = blocks[i*60 : (i+1)*60]
		writeFile(t, path, strings.Join(w.files[path], ""))
	}
	w.pool = blocks[240:]
	w.objects = []waysObject{{name: "CedarPolicy/shared", blocks: w.pool[:20]}, {name: "NamespacedCedarPolicy/ns-a/team", namespace: "ns-a"}}
	w.pool = w.pool[20:]
	for _, b := range w.pool {
		if len(w.objects[1].blocks) < 20 && isPermit(b) {
			w.objects[1].blocks = append(w.objects[1].blocks, b)
		}
	}
	return w
}

func isPermit(block string) bool { return strings.Contains(block, "\npermit (") }

// sources are the policy objects as the store takes them.
func (w *waysSource) sources() []Source {
	out := make([]Source, len(w.objects))
	for i, o := range w.objects {
		out[i] = Source{Name: o.name, Namespace: o.namespace, Data: []byte(strings.Join(o.blocks, ""))}
	}
	return out
}

// variant is a policy of the pool under a fresh @id (a permit if asked).
func (w *waysSource) variant(permit bool) string {
	for {
		b := w.pool[w.rng.IntN(len(w.pool))]
		if !permit || isPermit(b) {
			w.next++
			return strings.Replace(b, "@id(\"", fmt.Sprintf("@id(\"w%d-", w.next), 1)
		}
	}
}

// changed is blocks with one policy added (at the end if atEnd), replaced
// or removed, and what the change was.
func (w *waysSource) changed(blocks []string, atEnd, permit bool) ([]string, string) {
	out := slices.Clone(blocks)
	i := w.rng.IntN(len(out))
	switch op := w.rng.IntN(5); {
	case atEnd || op == 0:
		return append(out, w.variant(permit)), "add at the end"
	case op == 1:
		return slices.Insert(out, 0, w.variant(permit)), "insert at the top"
	case op == 2:
		return slices.Insert(out, i, w.variant(permit)), fmt.Sprintf("insert at #%d", i)
	case op == 3:
		out[i] = w.variant(permit)
		return out, fmt.Sprintf("replace #%d", i)
	default:
		return slices.Delete(out, i, i+1), fmt.Sprintf("remove #%d", i)
	}
}

// A change of one policy loads by the change (ReloadResult.Incremental)
// however it is written, into the set a fresh load of the final files and
// objects builds (ids, positions, texts), and as soon as the settle rule
// allows: a rename (in a later clock tick than the last write) or an
// object update at once, an in-place writer, an append or a rename within
// the last write's tick one settle window after the last write (within a
// settle step), whatever the store read of the file while it was being
// written. A half
// file that stood still for a window (a writer stalled mid-policy) is
// loaded and fails: the serving set stays, and stays the base the whole
// file is then built from, by the change. Over random changes (adds at
// the end, the top and between, replacements, removals) to files and to a
// cluster-scoped and a namespaced policy object, checked as kcedar serve
// checks them.
//
// It runs as kcedar serve runs on Linux, with the rename witness (a rename
// in the last write's tick loads at once), and without it (other systems).
func TestEveryWayOfWritingLoadsByTheChange(t *testing.T) {
	t.Run("witnessed", func(t *testing.T) { everyWayOfWriting(t, true) })
	t.Run("unwitnessed", func(t *testing.T) { everyWayOfWriting(t, false) })
}

func everyWayOfWriting(t *testing.T, witnessed bool) {
	steps := 60
	if testing.Short() {
		steps = 24
	}
	schema := embeddedschema.Schema(t)
	checker, err := lint.NewChecker(schema)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := newWaysSource(t, dir, 1)
	s, rec, clock := settleStore(t, []string{dir})
	s.validator, s.Checker, s.Schema = checker.Validator(), checker, schema
	if witnessed {
		witnessing(t, s)
	}
	s.SetSources(w.sources())
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	fresh := func() *cedarlang.PolicySet {
		f := NewStore([]string{dir}, checker.Validator(), quietLogger())
		f.Checker, f.Schema = checker, schema
		f.SetSources(w.sources())
		if err := f.Load(); err != nil {
			t.Fatalf("a fresh load: %v", err)
		}
		return f.Current()
	}
	seen := make([]int, waysOfWriting)
	for step := range steps {
		way := wayOfWriting(step % int(waysOfWriting))
		if step >= int(waysOfWriting) {
			way = wayOfWriting(w.rng.IntN(int(waysOfWriting)))
		}
		what := w.write(way, s, clock)
		if diff := sameSet(s.Current(), fresh()); diff != "" {
			t.Fatalf("step %d (%s, %s): %s", step, way, what, diff)
		}
		if r := rec.last(t); r.Err != nil || !r.Incremental || !r.Changed {
			t.Fatalf("step %d (%s, %s): %+v, want a change loaded by the change", step, way, what, r)
		}
		seen[way]++
	}
	for way, n := range seen {
		if n == 0 {
			t.Fatalf("no change was written %s", wayOfWriting(way))
		}
	}
}

// write makes one change of one policy the way way writes it and loads it
// into s, whose waits clock runs; it fails the test unless the load waited
// what the settle rule asks for that way.
func (w *waysSource) write(way wayOfWriting, s *Store, clock *settleClock) string {
	t := w.t
	if way == byObject {
		o := w.rng.IntN(len(w.objects))
		blocks, what := w.changed(w.objects[o].blocks, false, w.objects[o].namespace != "")
		w.objects[o].blocks = blocks
		s.SetSources(w.sources())
		w.loadAfter(s, clock, 0, 0)
		return what + " of " + w.objects[o].name
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range w.files {
			if !yield(p) {
				return
			}
		}
	})
	path := paths[w.rng.IntN(len(paths))]
	old := strings.Join(w.files[path], "")
	blocks, what := w.changed(w.files[path], way == byAppend, false)
	w.files[path] = blocks
	data := strings.Join(blocks, "")
	what += " of " + filepath.Base(path)
	switch way {
	case byRename:
		renameInto(t, path, data)
		w.loadAfter(s, clock, 0, 0)
	case inPlaceOneWrite:
		writeFile(t, path, data)
		w.loadAfter(s, clock, 0, s.Settle)
	case byAppend:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		writeString(t, f, strings.TrimPrefix(data, old))
		f.Close()
		w.loadAfter(s, clock, 0, s.Settle)
	case inPlacePieces:
		w.loadAfter(s, clock, w.writePieces(path, data, clock, s.Settle/2), s.Settle)
	case inPlaceStalled:
		w.stalled(path, data, s, clock)
	case byQuickRename:
		w.loadAfter(s, clock, 0, renameWait(t, path, data, s.Settle, s.renames != nil))
	}
	return what
}

// renameWait writes data to a temporary file beside path and renames it
// over path at once, and says how long the store must wait for it: nothing
// if a witness saw the rename or the rename left the change time after the
// modification time, else the settle window.
func renameWait(t *testing.T, path, data string, settle time.Duration, witnessed bool) time.Duration {
	t.Helper()
	if sameTick := quickRename(t, path, data); witnessed || !sameTick {
		return 0
	}
	return settle
}

// quickRename writes content to a temporary file beside path and renames it
// over path at once, its times as the kernel leaves them; it says whether
// the rename fell in the same tick of the file system's clock as the last
// write (equal change and modification times).
func quickRename(t *testing.T, path, content string) (sameTick bool) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	st, err := statPath(path)
	if err != nil {
		t.Fatal(err)
	}
	return !st.renamed()
}

// witnessing gives s a rename witness, as Store.Watch does (on Linux; the
// test is skipped elsewhere).
func witnessing(t *testing.T, s *Store) {
	t.Helper()
	r := watch.NewRenames()
	if r == nil {
		t.Skip("no rename witness on this system")
	}
	s.witnessRenames(r)
	t.Cleanup(func() { s.witnessRenames(nil) })
}

// writePieces truncates path and writes data in 2-6 pieces, cut anywhere:
// the first now, each next one up to gap after the one before, as the
// settle clock runs. It says when the last piece will have been written.
func (w *waysSource) writePieces(path, data string, clock *settleClock, gap time.Duration) time.Duration {
	f := inPlace(w.t, path)
	cuts := []int{0, len(data)}
	for range 1 + w.rng.IntN(5) {
		if c := 1 + w.rng.IntN(len(data)-1); !slices.Contains(cuts, c) {
			cuts = append(cuts, c)
		}
	}
	slices.Sort(cuts)
	writeString(w.t, f, data[:cuts[1]])
	var at time.Duration
	for i := 1; i+1 < len(cuts); i++ {
		at += time.Duration(1 + w.rng.Int64N(int64(gap)))
		piece := data[cuts[i]:cuts[i+1]]
		clock.after(at, func() { writeString(w.t, f, piece) })
	}
	clock.after(at, func() { f.Close() })
	return at
}

// stalled truncates path and writes data up to the middle of its last
// policy's @id, leaves it so for longer than the settle window (the half
// file loads and fails: the serving set stays), then writes the rest.
func (w *waysSource) stalled(path, data string, s *Store, clock *settleClock) {
	serving := s.Current()
	cut := strings.LastIndex(data, "@id(\"") + len("@id(\"w")
	f := inPlace(w.t, path)
	writeString(w.t, f, data[:cut])
	if err := s.Load(); err == nil || s.Current() != serving {
		w.t.Fatalf("a half file that stood still: %v; serving replaced: %v", err, s.Current() != serving)
	}
	writeString(w.t, f, data[cut:])
	f.Close()
	w.loadAfter(s, clock, 0, s.Settle)
}

// loadAfter loads s, whose writer's last write is lastWrite into the load
// (on clock), and fails the test unless the load took settle after it
// (within a settle step when settle is not 0).
func (w *waysSource) loadAfter(s *Store, clock *settleClock, lastWrite, settle time.Duration) {
	w.t.Helper()
	reads := s.FileReads()
	took, err := clock.load()
	if err != nil {
		w.t.Fatal(err)
	}
	limit := lastWrite + settle
	if settle > 0 {
		limit += settleStep(s.Settle)
	}
	if took < lastWrite+settle || took > limit {
		w.t.Fatalf("loaded after %v, want %v after the last write (at %v), within a settle step", took, settle, lastWrite)
	}
	if len(clock.due) > 0 {
		w.t.Fatal("loaded before the writer was done")
	}
	if lastWrite > 0 && s.FileReads()-reads < 3 {
		w.t.Fatalf("%d reads: the store did not read the file while it was being written", s.FileReads()-reads)
	}
}

// sameSet compares two sets policy by policy: ids, positions, sources,
// effects, enforcement and texts.
func sameSet(got, want *cedarlang.PolicySet) string {
	if got.Len() != want.Len() {
		return fmt.Sprintf("%d policies, want %d", got.Len(), want.Len())
	}
	for i, g := range got.Policies {
		w := want.Policies[i]
		if g.ID != w.ID || g.Source != w.Source || g.AST.Position != w.AST.Position || g.Effect != w.Effect ||
			g.Enforcement != w.Enforcement || string(g.Text()) != string(w.Text()) {
			return fmt.Sprintf("policy %d is %s at %s, want %s at %s", i, g.ID, g.Source, w.ID, w.Source)
		}
	}
	return ""
}
