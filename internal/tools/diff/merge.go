package diff

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/kcedar/kcedar/internal/lib/parallel"
)

// anyMark is a row's list that holds every value of its dimension.
const anyMark = "\x00any"

// A row's lists, in the order they are merged along (from the leaves up).
const (
	listWorlds = iota
	listNames
	listNamespaces // a non-resource URL's paths
	listVerbs
	nLists
)

// A row's key slots: its lists, its subjects, its targets and its class
// (the change, the policies, the note and the groups).
const (
	keySubjects = nLists + iota
	keyTargets
	keyClass
	nKeys
)

// row is a region while cells are merged: lists of values per dimension,
// the levels the cells were enumerated at, and the interned keys of its
// parts. Its first cell gives the region its change, policies and example.
type row struct {
	first    *cell
	note     string
	mayWiden bool
	in, out  []string  // the groups the subject is in and not in
	subjects []Subject // each without groups
	lists    [nLists][]string
	targets  []Target
	ids      [nKeys]int32
	// cells are the row's cells by subject (subjectKey).
	cells       map[string]*subjectCells
	lv          *levels
	worldReps   []string
	nonResource bool
}

// subjectCells are a row's cells of one subject: how many, and the first.
type subjectCells struct {
	n     int
	first *cell
}

// before reports whether c makes a better example than d: it is in fewer
// groups, or as many and decided first.
func (c *cell) before(d *cell) bool {
	if n, m := bits.OnesCount32(c.mask), bits.OnesCount32(d.mask); n != m {
		return n < m
	}
	return c.seq < d.seq
}

// addCells adds w's cells to m's (m's first cells stay first).
func (m *row) addCells(w *row) {
	for k, c := range w.cells {
		if mc, ok := m.cells[k]; ok {
			mc.n += c.n
			if c.first.before(mc.first) {
				mc.first = c.first
			}
		} else {
			m.cells[k] = c
		}
	}
}

// interner numbers strings: equal keys get equal numbers.
type interner map[string]int32

func (in interner) id(s string) int32 {
	if v, ok := in[s]; ok {
		return v
	}
	v := int32(len(in) + 1)
	in[s] = v
	return v
}

// newRow is the row of one cell.
func (r *run) newRow(c *cell) *row {
	x := c.lf.x
	s := subjectOf(c)
	w := &row{first: c, in: s.InGroups, out: s.NotIn, subjects: []Subject{withoutGroups(s)}, targets: []Target{r.targetOf(x)},
		cells: map[string]*subjectCells{subjectKey(s): {n: 1, first: c}}, lv: c.lf.levels, worldReps: c.lf.worldReps, nonResource: x.entityType == nonResourceType}
	w.lists = [nLists][]string{{c.worldOf().desc}, {x.nameText()}, {x.namespace}, {x.verb}}
	if w.nonResource {
		w.lists[listNamespaces], w.lists[listNames] = []string{x.path}, []string{anyMark}
	}
	if c.old.IsConditional() && c.new.IsConditional() {
		w.mayWiden = mayWiden(c.old, c.new)
		w.note = "conditional on other object conditions, no wider"
		if w.mayWiden {
			w.note = "conditional on other object conditions that may allow more"
		}
	}
	if c.lf.otherConditions {
		w.note = strings.TrimPrefix(w.note+"; other groups' permits in other namespaces may add conditions to both sides", "; ")
	}
	return w
}

// classText is the row's change, policies and note.
func (w *row) classText() string {
	c := w.first
	return c.keys[0] + "\x00" + c.keys[1] + "\x00" + strings.Join(policyIDs(c.old), ",") + "\x00" +
		strings.Join(policyIDs(c.new), ",") + "\x00" + w.note
}

// region is the row's region (without its subject, lists and example).
func (w *row) region(exact bool) Region {
	c := w.first
	return Region{Change: Change{From: c.old.Type().String(), To: c.new.Type().String()},
		OldPolicies: policyIDs(c.old), NewPolicies: policyIDs(c.new), Exact: exact, MayWiden: w.mayWiden, Note: w.note}
}

// example is the request of cell c.
func example(c *cell) *Example {
	x := c.lf.x
	return &Example{User: c.lf.user, Groups: c.in(), Verb: x.verb, APIGroup: x.group, Resource: x.resource, Subresource: x.subresource,
		Namespace: x.namespace, Name: x.name, NameFromSelector: x.nameFromSelector, NamespaceLabels: c.worldOf().desc, Path: x.path}
}

// intern numbers every key slot of w.
func (w *row) intern(in interner) {
	for slot := range nKeys {
		w.reintern(slot, in)
	}
}

// reintern numbers key slot of w again.
func (w *row) reintern(slot int, in interner) {
	switch slot {
	case keySubjects:
		keys := make([]string, len(w.subjects))
		for i, s := range w.subjects {
			keys[i] = subjectKey(s)
		}
		w.ids[slot] = in.id(strings.Join(sorted(keys), "\x01"))
	case keyTargets:
		keys := make([]string, len(w.targets))
		for i, t := range w.targets {
			keys[i] = targetKey(t)
		}
		w.ids[slot] = in.id(strings.Join(sorted(keys), "\x01"))
	case keyClass:
		w.ids[slot] = in.id(w.classText() + "\x00" + strings.Join(w.in, ",") + "\x00" + strings.Join(w.out, ","))
	default:
		w.ids[slot] = in.id(strings.Join(sorted(w.lists[slot]), "\x01"))
	}
}

// regions turns the differing cells into regions. Cells with the same
// change and policies are merged one dimension at a time where the other
// dimensions are equal, from the leaves up (groups, label worlds, names,
// namespaces, subjects, verbs, targets), so each region is exactly the
// product of its lists. A list holding every value of its level becomes
// "any", and subjects covering every principal of the level (or every one
// of a kind) become anyone (or every principal of the kind).
func (r *run) regions(exact bool) []Region {
	rows := r.leafRows()
	in := interner{}
	for i := range rows {
		rows[i].intern(in)
	}
	for _, slot := range []int{listWorlds, listNames, listNamespaces, keySubjects} {
		rows = mergeAlong(rows, slot, in)
	}
	for i := range rows {
		rows[i].subjects = collapseSubjects(rows[i].subjects, rows[i].lv.subjects, rows[i].lv.users)
		rows[i].reintern(keySubjects, in)
	}
	for _, slot := range []int{listVerbs, keyTargets} {
		rows = mergeAlong(rows, slot, in)
	}
	var out []Region
	for _, w := range rows {
		out = append(out, w.regions(exact)...)
	}
	return out
}

// leafRows are the rows of the cells, each leaf's merged on its groups
// (rows of different leaves never merge on a group), on every core.
func (r *run) leafRows() []*row {
	var leaves [][2]int // cell ranges of one leaf (cells are in task order)
	for i := range r.cells {
		if i == 0 || r.cells[i].lf != r.cells[i-1].lf {
			leaves = append(leaves, [2]int{i, i})
		}
		leaves[len(leaves)-1][1] = i + 1
	}
	parts := make([][]*row, len(leaves))
	parallel.For(len(leaves), func(k int) {
		var leafRows []*row
		for _, c := range r.cells[leaves[k][0]:leaves[k][1]] {
			leafRows = append(leafRows, r.newRow(c))
		}
		parts[k] = mergeGroups(leafRows)
	})
	rows := make([]*row, 0, len(r.cells))
	for _, p := range parts {
		rows = append(rows, p...)
	}
	return rows
}

// mergeAlong merges rows equal in everything but key slot, then marks the
// merged lists that hold every value of their level.
func mergeAlong(rows []*row, slot int, in interner) []*row {
	index := make(map[[nKeys]int32]int, len(rows))
	out := make([]*row, 0, len(rows))
	for _, w := range rows {
		k := w.ids
		k[slot] = 0
		if slot == keyTargets && w.nonResource {
			k[slot] = -1 // a path is not a namespace: never merged with a resource
		}
		i, ok := index[k]
		if !ok {
			index[k] = len(out)
			out = append(out, w)
			continue
		}
		m := out[i]
		switch slot {
		case keySubjects:
			m.subjects = append(m.subjects, w.subjects...)
		case keyTargets:
			for _, t := range w.targets {
				if !slices.Contains(m.targets, t) {
					m.targets = append(m.targets, t)
				}
			}
		default:
			m.lists[slot] = appendNew(m.lists[slot], w.lists[slot]...)
		}
		m.addCells(w)
	}
	for i := range out {
		out[i].markAny(slot)
		out[i].reintern(slot, in)
	}
	return out
}

// markAny replaces the list of key slot by anyMark when it holds every
// representative of its level.
func (w *row) markAny(slot int) {
	var reps []string
	switch slot {
	case listWorlds:
		reps = w.worldReps
	case listNames:
		reps = w.lv.names
	case listNamespaces:
		reps = w.lv.namespaces
	case listVerbs:
		reps = w.lv.verbs
	default:
		return
	}
	list := w.lists[slot]
	if len(reps) > 0 && !slices.Equal(reps, []string{""}) && !slices.Equal(list, []string{anyMark}) &&
		!slices.ContainsFunc(reps, func(v string) bool { return !slices.Contains(list, v) }) {
		w.lists[slot] = []string{anyMark}
	}
}

func withoutGroups(s Subject) Subject {
	s.InGroups, s.NotIn = nil, nil
	return s
}

func appendNew(list []string, vals ...string) []string {
	for _, v := range vals {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// collapseSubjects describes subjects (all of one level, whose subjects
// are all, and whose users are users) as briefly as they truly are:
// anyone when they are all of them; else every principal of a kind they
// hold all of, every ServiceAccount of a namespace they hold all of (a
// namespace the policies compare principal.namespace with, so that each
// of its ServiceAccounts has a representative in it), and the rest one by
// one.
func collapseSubjects(subjects []Subject, all []string, users *userSpace) []Subject {
	have := map[string]bool{}
	for _, s := range subjects {
		have[subjectKey(s)] = true
	}
	if !slices.ContainsFunc(all, func(k string) bool { return !have[k] }) {
		return []Subject{{Kind: KindAnyone}}
	}
	groups := map[string][]string{} // kind, or serviceaccount and namespace -> keys
	for _, k := range all {
		kind, rest, _ := strings.Cut(k, "\x00")
		ns, _, _ := strings.Cut(rest, "\x00")
		groups[kind] = append(groups[kind], k)
		if kind == KindServiceAccount && users.pNamespaces.literal[ns] {
			groups[kind+"\x00"+ns] = append(groups[kind+"\x00"+ns], k)
		}
	}
	covered := map[string]bool{}
	var out []Subject
	for _, g := range sortedKeys(mapKeys(map[string]bool{}, groups)) {
		keys := groups[g]
		if slices.ContainsFunc(keys, func(k string) bool { return !have[k] || covered[k] }) {
			continue
		}
		kind, ns, _ := strings.Cut(g, "\x00")
		out = append(out, Subject{Kind: kind, Namespace: ns, All: true})
		for _, k := range keys {
			covered[k] = true
		}
	}
	for _, s := range subjects {
		if !covered[subjectKey(s)] {
			out = append(out, s)
		}
	}
	return out
}

// covers reports whether subject s (as collapseSubjects describes it)
// holds the subject whose subjectKey is key.
func covers(s Subject, key string) bool {
	kind, rest, _ := strings.Cut(key, "\x00")
	ns, _, _ := strings.Cut(rest, "\x00")
	switch {
	case s.Kind == KindAnyone:
		return true
	case s.All:
		return s.Kind == kind && (s.Namespace == "" || s.Namespace == ns)
	}
	return subjectKey(s) == key
}

// regions are the row's regions, one for each of its subjects.
func (w *row) regions(exact bool) []Region {
	g := w.region(exact)
	anyOf := [nLists]string{AnyLabels, AnyName, AnyNamespace, AnyVerb}
	if w.nonResource {
		anyOf[listNamespaces] = AnyPath
	}
	for slot := range w.lists {
		if slices.Equal(w.lists[slot], []string{anyMark}) {
			w.lists[slot] = nil
			if !(w.nonResource && slot == listNames) {
				g.Any = append(g.Any, anyOf[slot])
			}
		}
	}
	g.Verbs, g.Namespaces, g.Names, g.Targets = w.lists[listVerbs], w.lists[listNamespaces], w.lists[listNames], w.targets
	if !slices.Equal(w.lists[listWorlds], []string{""}) {
		g.NamespaceLabels = w.lists[listWorlds]
	}
	if w.nonResource {
		g.Targets, g.Namespaces, g.Names = nil, nil, nil
		for _, p := range w.lists[listNamespaces] {
			g.Targets = append(g.Targets, Target{EntityType: string(nonResourceType), Path: p})
		}
		if len(g.Targets) == 0 {
			g.Targets = []Target{{EntityType: string(nonResourceType)}}
		}
	}
	out := make([]Region, len(w.subjects))
	keys := sortedKeys(mapKeys(map[string]bool{}, w.cells))
	for i, s := range w.subjects {
		out[i] = g
		out[i].Subject = s
		out[i].Subject.InGroups, out[i].Subject.NotIn = w.in, w.out
		var first *cell
		for _, k := range keys {
			if c := w.cells[k]; covers(s, k) {
				out[i].Requests += c.n
				if first == nil || c.first.before(first) {
					first = c.first
				}
			}
		}
		out[i].Example = example(first)
	}
	return out
}

// mergeGroups merges rows of one leaf equal but for whether the subject is
// in one group: the change does not depend on that group, which leaves
// both lists. Repeated until no two rows merge, so each row stays exactly
// the requests of its cells.
func mergeGroups(rows []*row) []*row {
	for {
		index := map[string]int{} // key without group g, and g's side -> row
		used := map[int]bool{}    // rows merged in this pass: their keys are stale
		merged := false
		var out []*row
		for _, w := range rows {
			if i, g, ok := w.partner(index); ok && !used[i] {
				used[i] = true
				m := out[i]
				m.in, m.out = without(m.in, g), without(m.out, g)
				m.addCells(w)
				merged = true
				continue
			}
			for _, g := range w.in {
				index[w.groupKey(g)+"\x00in"] = len(out)
			}
			for _, g := range w.out {
				index[w.groupKey(g)+"\x00out"] = len(out)
			}
			out = append(out, w)
		}
		rows = out
		if !merged {
			return rows
		}
	}
}

// partner finds a row of index equal to w but on the other side of one
// group g (one not yet merged away).
func (w *row) partner(index map[string]int) (int, string, bool) {
	for _, g := range w.in {
		if i, ok := index[w.groupKey(g)+"\x00out"]; ok {
			return i, g, true
		}
	}
	for _, g := range w.out {
		if i, ok := index[w.groupKey(g)+"\x00in"]; ok {
			return i, g, true
		}
	}
	return 0, "", false
}

// groupKey is what tells apart rows of one leaf, with group g left out of
// the subject: the other groups, the change and policies, and the world.
func (w *row) groupKey(g string) string {
	return strings.Join(without(w.in, g), ",") + "\x00" + strings.Join(without(w.out, g), ",") + "\x00" +
		w.first.keys[0] + "\x00" + w.first.keys[1] + "\x00" + w.note + "\x00" + w.lists[listWorlds][0]
}

// without is list without g (a new slice).
func without(list []string, g string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == g })
}
