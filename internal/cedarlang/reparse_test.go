package cedarlang_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// editModel is a few policy files as lists of policy texts, edited at
// random the way people and controllers edit them.
type editModel struct {
	rng   *rand.Rand
	pool  []string // policy texts to add
	files map[string][]string
	next  int // names new files
}

func newEditModel(seed uint64) *editModel {
	m := &editModel{rng: rand.New(rand.NewPCG(seed, 7)), files: map[string][]string{}}
	blocks := strings.SplitAfter(zoo.Policies(240, seed), "\n\n")
	// The platform shapes (the user's extra, namespace labels, like
	// suffixes) among them, so derived indexes file their keys too.
	for _, p := range testgen.Platform(120, seed, false) {
		blocks = append(blocks, p+"\n\n")
	}
	m.rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	m.pool = blocks[180:]
	for i, b := range blocks[:180] {
		name := fmt.Sprintf("f%d.cedar", i%3)
		m.files[name] = append(m.files[name], b)
	}
	return m
}

// text is a file's content.
func (m *editModel) text(name string) []byte { return []byte(strings.Join(m.files[name], "")) }

func (m *editModel) names() []string {
	var out []string
	for n := range m.files {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// variant is a policy text from the pool, sometimes without its @id (then
// named by its position), made a forbid, or invalid (a syntax error, or an
// @enforcement that is not one).
func (m *editModel) variant() string {
	b := m.pool[m.rng.IntN(len(m.pool))]
	switch m.rng.IntN(10) {
	case 0, 1:
		if _, rest, ok := strings.Cut(b, "\n"); ok && strings.HasPrefix(b, "@id(") {
			return rest
		}
	case 2:
		return strings.Replace(b, "permit (", "forbid (", 1)
	case 3:
		if m.rng.IntN(3) == 0 {
			return "permit (principal, action, resource) when { ( };\n\n"
		}
		return "@enforcement(\"sometimes\")\n" + b
	}
	// A fresh @id, so adding it twice is no duplicate.
	m.next++
	return strings.Replace(b, "@id(\"", fmt.Sprintf("@id(\"v%d-", m.next), 1)
}

// edit applies one random edit and says what it was.
func (m *editModel) edit() string {
	names := m.names()
	name := names[m.rng.IntN(len(names))]
	ps := m.files[name]
	at := m.rng.IntN(len(ps) + 1)
	switch op := m.rng.IntN(9); {
	case op == 0 && len(ps) > 0: // edit one
		i := m.rng.IntN(len(ps))
		m.files[name] = slices.Concat(ps[:i], []string{m.variant()}, ps[i+1:])
		return fmt.Sprintf("edit %s #%d", name, i)
	case op == 1 && len(ps) > 0: // remove one
		i := m.rng.IntN(len(ps))
		m.files[name] = slices.Delete(slices.Clone(ps), i, i+1)
		return fmt.Sprintf("remove %s #%d", name, i)
	case op == 2 && len(ps) > 1: // swap two
		i, j := m.rng.IntN(len(ps)), m.rng.IntN(len(ps))
		ps = slices.Clone(ps)
		ps[i], ps[j] = ps[j], ps[i]
		m.files[name] = ps
		return fmt.Sprintf("swap %s #%d #%d", name, i, j)
	case op == 3: // rename the file
		m.next++
		to := fmt.Sprintf("r%d.cedar", m.next)
		m.files[to] = ps
		delete(m.files, name)
		return fmt.Sprintf("rename %s %s", name, to)
	case op == 4: // a new file
		m.next++
		to := fmt.Sprintf("n%d.cedar", m.next)
		m.files[to] = []string{m.variant(), m.variant()}
		return "add file " + to
	case op == 5 && len(names) > 1: // remove a file
		delete(m.files, name)
		return "remove file " + name
	case op == 6: // blank lines and a comment above, moving every later policy
		i := m.rng.IntN(len(ps) + 1)
		m.files[name] = slices.Insert(slices.Clone(ps), i, "// moved\n\n")
		return fmt.Sprintf("comment %s #%d", name, i)
	default: // insert (at the end, or in the middle)
		m.files[name] = slices.Insert(slices.Clone(ps), at, m.variant())
		return fmt.Sprintf("insert %s #%d", name, at)
	}
}

// samePolicies compares two parses of the same files, field by field.
func samePolicies(got, want []*cedarlang.Policy) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d policies, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.ID != w.ID || g.Source != w.Source || g.Reason != w.Reason || g.Effect != w.Effect || g.Enforcement != w.Enforcement ||
			g.UsesObjects != w.UsesObjects || g.AST.Position != w.AST.Position || string(g.Text()) != string(w.Text()) ||
			cedarlang.TextEndForTest(g) != cedarlang.TextEndForTest(w) {
			return fmt.Sprintf("policy %d: %s at %s %+v, want %s at %s %+v", i, g.ID, g.Source, g.AST.Position, w.ID, w.Source, w.AST.Position)
		}
	}
	return ""
}

// Re-parsing a changed file (Reparse) gives exactly what parsing it whole
// gives, and the set derived from the serving one (NewPolicySetFrom: its
// index derived by the change) has the index structures a fresh build
// has: each policy's checks, each bucket's policies, the verbs; over
// random edit sequences (edit, insert, remove, swap, rename and add or
// remove files, policies with and without @id, forbids, invalid ones).
func TestReparseAndDerivedIndexEqualFullBuild(t *testing.T) {
	steps, derived := 300, 0
	if testing.Short() {
		steps = 60
	}
	m := newEditModel(5)
	type parsed struct {
		data     []byte
		policies []*cedarlang.Policy
	}
	good := map[string]parsed{}
	lastGood := maps.Clone(m.files)
	var serving *cedarlang.PolicySet
	for step := 0; step < steps; step++ {
		what := m.edit()
		next := map[string]parsed{}
		var all []*cedarlang.Policy
		failed := false
		for _, name := range m.names() {
			data := m.text(name)
			want, werr := cedarlang.ParsePolicies(name, data)
			got, gerr := want, werr
			if old, ok := good[name]; ok {
				got, _, gerr = cedarlang.Reparse(name, data, name, old.data, old.policies)
			}
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Fatalf("step %d (%s): %s: Reparse error %v, ParsePolicies error %v", step, what, name, gerr, werr)
			}
			if d := samePolicies(got, want); werr == nil && d != "" {
				t.Fatalf("step %d (%s): %s: %s", step, what, name, d)
			}
			failed = failed || werr != nil
			next[name] = parsed{data, got}
			all = append(all, got...)
		}
		set, err := cedarlang.NewPolicySetFrom(serving, all)
		if !failed {
			_, ferr := cedarlang.NewPolicySet(freshCopies(t, m))
			if fmt.Sprint(err) != fmt.Sprint(ferr) {
				t.Fatalf("step %d (%s): NewPolicySetFrom error %v, NewPolicySet error %v", step, what, err, ferr)
			}
		}
		if failed || err != nil {
			// A failed load (or a duplicate id): the last good files stay
			// what later edits are derived from, and the user reverts.
			m.files = maps.Clone(lastGood)
			continue
		}
		if serving != nil {
			want, err := cedarlang.SameSeedSetForTest(serving, freshCopies(t, m))
			if err != nil {
				t.Fatal(err)
			}
			if d := cedarlang.IndexDiffForTest(set, want); d != "" {
				t.Fatalf("step %d (%s): the derived index differs from a fresh build: %s", step, what, d)
			}
			if cedarlang.DerivedForTest(set) {
				derived++
			}
			if d := sameIDsAndKept(set, serving); d != "" {
				t.Fatalf("step %d (%s): %s", step, what, d)
			}
		}
		serving, good, lastGood = set, next, maps.Clone(m.files)
	}
	t.Logf("%d of %d steps derived the index", derived, steps)
	if derived < steps/2 {
		t.Fatalf("only %d of %d steps derived the index", derived, steps)
	}
}

// sameIDsAndKept checks what a derived set answers without its index:
// every policy is found by its id, an id of serving that set lacks is not,
// and each policy set says it kept from serving (KeptFrom) has the same
// text and effect, in the same order.
func sameIDsAndKept(set, serving *cedarlang.PolicySet) string {
	ids := map[string]bool{}
	for _, p := range set.Policies {
		ids[p.ID] = true
		if q, ok := set.Get(p.ID); !ok || q != p {
			return fmt.Sprintf("Get(%q) does not find the policy at %s", p.ID, p.Source)
		}
	}
	for _, p := range serving.Policies {
		if _, ok := set.Get(p.ID); ok != ids[p.ID] {
			return fmt.Sprintf("Get(%q) found %v, want %v", p.ID, ok, ids[p.ID])
		}
	}
	oldOf, ok := set.KeptFrom(serving)
	if !ok {
		return ""
	}
	last := int32(-1)
	for j, i := range oldOf {
		if i < 0 {
			continue
		}
		p, q := set.Policies[j], serving.Policies[i]
		if i <= last || string(p.Text()) != string(q.Text()) || p.Effect != q.Effect {
			return fmt.Sprintf("KeptFrom says %s was kept from %s", p.Source, q.Source)
		}
		last = i
	}
	return ""
}

// freshCopies parses the model's files anew: policies no index has seen.
func freshCopies(t *testing.T, m *editModel) []*cedarlang.Policy {
	var all []*cedarlang.Policy
	for _, name := range m.names() {
		ps, err := cedarlang.ParsePolicies(name, m.text(name))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ps...)
	}
	return all
}

// The comparison catches a broken index: one policy missing from its
// buckets.
func TestIndexDiffCatchesABrokenIndex(t *testing.T) {
	m := newEditModel(9)
	base, err := cedarlang.NewPolicySet(freshCopies(t, m))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := cedarlang.ParsePolicies("zz.cedar", []byte(m.pool[0]))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySetFrom(base, slices.Concat(base.Policies, extra))
	if err != nil || !cedarlang.DerivedForTest(set) {
		t.Fatalf("derived: %v %v", cedarlang.DerivedForTest(set), err)
	}
	more, _ := cedarlang.ParsePolicies("zz.cedar", []byte(m.pool[0]))
	want, err := cedarlang.SameSeedSetForTest(base, slices.Concat(freshCopies(t, m), more))
	if err != nil {
		t.Fatal(err)
	}
	if d := cedarlang.IndexDiffForTest(set, want); d != "" {
		t.Fatalf("before breaking it: %s", d)
	}
	cedarlang.BreakIndexForTest(set, int32(len(set.Policies)/2))
	if cedarlang.IndexDiffForTest(set, want) == "" {
		t.Fatal("a policy dropped from the index went unnoticed")
	}
}
