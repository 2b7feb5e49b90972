package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// policyDir is policy files in a directory, edited at random: each file a
// list of policy texts.
type policyDir struct {
	t     *testing.T
	dir   string
	rng   *rand.Rand
	pool  []string
	files map[string][]string
	next  int
}

func newPolicyDir(t *testing.T, n int, seed uint64) *policyDir {
	d := &policyDir{t: t, dir: t.TempDir(), rng: rand.New(rand.NewPCG(seed, 3)), files: map[string][]string{}}
	blocks := strings.SplitAfter(zoo.Policies(2*n, seed), "\n\n")
	d.pool = blocks[n:]
	for i, b := range blocks[:n] {
		name := fmt.Sprintf("f%d.cedar", i%4)
		d.files[name] = append(d.files[name], b)
	}
	// A few platform shapes at the end of each file: some read the
	// namespace's labels, which an engine made after a change must know
	// (namespaceReaders). The edits draw from the zoo, whose requests
	// the changes must move.
	for i, p := range testgen.Platform(n/8, seed, false) {
		name := fmt.Sprintf("f%d.cedar", i%4)
		d.files[name] = append(d.files[name], p+"\n\n")
	}
	d.write()
	return d
}

// write makes the directory hold exactly the files.
func (d *policyDir) write() {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := d.files[e.Name()]; !ok {
			os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
	for name, ps := range d.files {
		if err := os.WriteFile(filepath.Join(d.dir, name), []byte(strings.Join(ps, "")), 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
}

func (d *policyDir) names() []string {
	var out []string
	for n := range d.files {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// variant is a policy text of the pool with a fresh @id, or without one
// (named by its position), made a forbid, or one that fails to load (a
// syntax error, an unknown attribute, an @enforcement that is not one).
func (d *policyDir) variant() string {
	b := d.pool[d.rng.IntN(len(d.pool))]
	switch d.rng.IntN(12) {
	case 0, 1:
		if _, rest, ok := strings.Cut(b, "\n"); ok {
			return rest
		}
	case 2, 3:
		b = strings.Replace(b, "permit (", "forbid (", 1)
	case 4:
		return []string{
			"permit (principal, action, resource) when { ( };\n\n",
			"permit (principal, action, resource is core::pods) when { resource.nosuchattribute == \"x\" };\n\n",
			"@enforcement(\"sometimes\")\n" + b,
		}[d.rng.IntN(3)]
	}
	d.next++
	return strings.Replace(b, "@id(\"", fmt.Sprintf("@id(\"v%d-", d.next), 1)
}

// edit changes the files at random, and says how.
func (d *policyDir) edit() string {
	names := d.names()
	name := names[d.rng.IntN(len(names))]
	ps := slices.Clone(d.files[name])
	switch op := d.rng.IntN(10); {
	case op == 0 && len(ps) > 0:
		i := d.rng.IntN(len(ps))
		ps[i] = d.variant()
		d.files[name] = ps
		return fmt.Sprintf("edit %s #%d", name, i)
	case op == 1 && len(ps) > 0:
		i := d.rng.IntN(len(ps))
		d.files[name] = slices.Delete(ps, i, i+1)
		return fmt.Sprintf("remove %s #%d", name, i)
	case op == 2 && len(ps) > 1:
		i, j := d.rng.IntN(len(ps)), d.rng.IntN(len(ps))
		ps[i], ps[j] = ps[j], ps[i]
		d.files[name] = ps
		return fmt.Sprintf("swap %s #%d #%d", name, i, j)
	case op == 3:
		d.next++
		to := fmt.Sprintf("r%d.cedar", d.next)
		d.files[to] = ps
		delete(d.files, name)
		return fmt.Sprintf("rename %s to %s", name, to)
	case op == 4:
		d.next++
		to := fmt.Sprintf("n%d.cedar", d.next)
		d.files[to] = []string{d.variant(), d.variant()}
		return "add file " + to
	case op == 5 && len(names) > 1:
		delete(d.files, name)
		return "remove file " + name
	case op == 6:
		i := d.rng.IntN(len(ps) + 1)
		d.files[name] = slices.Insert(ps, i, "// a comment\n\n")
		return fmt.Sprintf("comment %s #%d", name, i)
	default:
		i := d.rng.IntN(len(ps) + 1)
		if op == 7 {
			i = len(ps)
		}
		d.files[name] = slices.Insert(ps, i, d.variant())
		return fmt.Sprintf("insert %s #%d", name, i)
	}
}

// decisionsDiff is the first request of reqs that got and want decide
// differently (decision, deciding policies, conditions, errors), or "".
func decisionsDiff(s *schemagen.Schema, got, want *cedarlang.PolicySet, reqs []*entities.Request) string {
	a, b := NewEngine(s, got, EngineOptions{}), NewEngine(s, want, EngineOptions{})
	for i, req := range reqs {
		g, w := a.Authorize(context.Background(), req), b.Authorize(context.Background(), req)
		if d := crossSetDiff(g, w, want); d != "" {
			return fmt.Sprintf("request %d %s: %s", i, req, d)
		}
	}
	return ""
}

// crossSetDiff is outcomeDiff for decisions of two sets: residuals are
// compared by policy id and expression, not by policy pointer.
func crossSetDiff(got, want Decision, ps *cedarlang.PolicySet) string {
	d := outcomeDiff(got, want, ps)
	if !strings.HasPrefix(d, "deny conditions") && !strings.HasPrefix(d, "allow conditions") {
		return d
	}
	text := func(rs []Residual) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s %s %v", r.Policy.ID, r.EntityType, r.Expr))
		}
		return strings.Join(out, "; ")
	}
	if g, w := text(got.DenyConditions()), text(want.DenyConditions()); g != w {
		return fmt.Sprintf("deny conditions %s, want %s", g, w)
	}
	if g, w := text(got.AllowConditions()), text(want.AllowConditions()); g != w {
		return fmt.Sprintf("allow conditions %s, want %s", g, w)
	}
	return ""
}

// samePolicySet compares two sets policy by policy: ids, positions, texts.
func samePolicySet(got, want *cedarlang.PolicySet) string {
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

// A store reloading by the change (the serving set's unchanged policies
// kept, a changed file re-parsed policy by policy, only new policies
// validated, the index derived: store.Store.buildDelta) serves exactly
// what a fresh load of the same files serves: the same policies (ids,
// positions, texts) and, over zoo requests, the same decisions, deciding
// policies, conditions and errors; it fails where a fresh load fails, and
// the last good set keeps serving. Over random edit sequences: edits,
// inserts at the end and in the middle, removals, swaps, comments that move
// every later policy, renamed, added and removed files, policies with and
// without @id, forbids, policies that fail to parse or validate. The
// comparison can fail: a delta that lost the change (the previous set) is
// caught wherever the change moves a decision of the requests (a fifth of
// the changes: comments, swaps and most edits move none).
func TestIncrementalReloadDecidesAsAFreshLoad(t *testing.T) {
	steps, nreq := 100, 300
	if testing.Short() || raceEnabled {
		steps, nreq = 25, 100
	}
	schema := embeddedschema.Schema(t)
	checker, err := lint.NewChecker(schema)
	if err != nil {
		t.Fatal(err)
	}
	d := newPolicyDir(t, 240, 1)
	load := func() (*store.Store, error) {
		s := store.NewStore([]string{d.dir}, checker.Validator(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		s.Checker, s.Schema = checker, schema
		return s, s.Load()
	}
	inc, err := load()
	if err != nil {
		t.Fatal(err)
	}
	incremental := 0
	inc.OnReload = func(r store.ReloadResult) {
		if r.Incremental {
			incremental++
		}
	}
	reqs := zoo.Requests(480, nreq, 3)
	lastGood, caught, changed := maps.Clone(d.files), 0, 0
	chained := NewEngine(schema, inc.Current(), EngineOptions{}) // each made after the one before
	readers := 0                                                 // namespace readers compared
	for step := 0; step < steps; step++ {
		what := d.edit()
		d.write()
		prev := inc.Current()
		errInc := inc.Load()
		fresh, errFresh := load()
		if (errInc == nil) != (errFresh == nil) {
			t.Fatalf("step %d (%s): incremental load: %v; fresh load: %v", step, what, errInc, errFresh)
		}
		if errInc != nil {
			if inc.Current() != prev {
				t.Fatalf("step %d (%s): a failed load replaced the serving set", step, what)
			}
			d.files = maps.Clone(lastGood) // reverted
			continue
		}
		if diff := samePolicySet(inc.Current(), fresh.Current()); diff != "" {
			t.Fatalf("step %d (%s): %s", step, what, diff)
		}
		chained = newEngineAfter(chained, schema, inc.Current(), EngineOptions{})
		diff, n := sameNamespaceReaders(chained, NewEngine(schema, fresh.Current(), EngineOptions{}))
		if diff != "" {
			t.Fatalf("step %d (%s): %s", step, what, diff)
		}
		readers += n
		if diff := decisionsDiff(schema, inc.Current(), fresh.Current(), reqs); diff != "" {
			t.Fatalf("step %d (%s): the incremental set decides differently from a fresh load: %s", step, what, diff)
		}
		if samePolicySet(prev, fresh.Current()) != "" {
			changed++
			if decisionsDiff(schema, prev, fresh.Current(), reqs) != "" {
				caught++
			}
		}
		lastGood = maps.Clone(d.files)
	}
	t.Logf("%d steps: %d loads by the change; of %d changes, %d change a decision", steps, incremental, changed, caught)
	if readers == 0 {
		t.Fatal("no policy read namespaceObject: the engines' namespace readers were not compared")
	}
	if incremental < steps/2 || caught < changed/10 {
		t.Fatalf("too few loads by the change (%d) or decisions changed (%d of %d): the test would not catch a broken delta", incremental, caught, changed)
	}
}

// sameNamespaceReaders compares which policies (by position) two engines
// of the same set found to read namespaceObject; readers counts them.
func sameNamespaceReaders(got, want *Engine) (diff string, readers int) {
	for i, p := range want.policies.Policies {
		g := got.nsReaders[got.policies.Policies[i]]
		if g != want.nsReaders[p] || got.nsReadsAt[i] != want.nsReadsAt[i] {
			return fmt.Sprintf("policy %s: reads namespaceObject %v, a fresh engine says %v", p.ID, g, want.nsReaders[p]), readers
		}
		if g {
			readers++
		}
	}
	return "", readers
}
