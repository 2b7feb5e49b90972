package policyobjects

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// objectWorld is CedarPolicy and NamespacedCedarPolicy objects as an
// informer holds them, changed one policy at a time.
type objectWorld struct {
	t       *testing.T
	rng     *rand.Rand
	checker *Checker
	pool    []string            // policy texts to add
	blocks  map[string][]string // each object's policy texts, by SourceName
	objs    map[string]*unstructured.Unstructured
	inf     map[string]cache.Store // by kind
	next    int
}

func newObjectWorld(t *testing.T, checker *Checker, inf map[string]cache.Store, seed uint64) *objectWorld {
	var pool []string
	for _, b := range strings.SplitAfter(zoo.Policies(400, seed), "\n\n") {
		if strings.TrimSpace(b) != "" {
			pool = append(pool, b)
		}
	}
	w := &objectWorld{t: t, rng: rand.New(rand.NewPCG(seed, 11)), checker: checker, pool: pool,
		blocks: map[string][]string{}, objs: map[string]*unstructured.Unstructured{}, inf: inf}
	for i := range 4 {
		w.put(KindCluster, "", fmt.Sprintf("team-%d", i), pool[i*40:(i+1)*40])
	}
	for _, ns := range []string{"ns-a", "ns-b"} {
		var permits []string
		for len(permits) < 15 {
			permits = append(permits, w.variant(KindNamespaced, ns, permits))
		}
		w.put(KindNamespaced, ns, "team", permits)
	}
	return w
}

// put creates or updates the object kind/ns/name with blocks.
func (w *objectWorld) put(kind, ns, name string, blocks []string) {
	key := SourceName(kind, ns, name)
	gen := int64(1)
	old, existed := w.objs[key]
	if existed {
		gen = old.GetGeneration() + 1
	}
	u := object(kind, ns, name, strings.Join(blocks, ""), gen)
	var err error
	if existed {
		err = w.inf[kind].Update(u)
	} else {
		err = w.inf[kind].Add(u)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.blocks[key], w.objs[key] = blocks, u
}

// variant is a policy of the pool under a fresh @id that the object
// kind/ns with the policies blocks accepts (a namespaced object: permits
// its namespace may hold).
func (w *objectWorld) variant(kind, ns string, blocks []string) string {
	for {
		b := w.pool[w.rng.IntN(len(w.pool))]
		w.next++
		b = strings.Replace(b, "@id(\"", fmt.Sprintf("@id(\"v%d-", w.next), 1)
		if kind == KindCluster || w.checker.Check(kind, ns, "probe", strings.Join(append(slices.Clone(blocks), b), "")).Valid {
			return b
		}
	}
}

// change makes one change of one policy object: a policy added (at the end,
// the top or between), replaced or removed, or an object created or
// deleted; it says what it did.
func (w *objectWorld) change() string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range w.objs {
			if !yield(k) {
				return
			}
		}
	})
	key := keys[w.rng.IntN(len(keys))]
	u := w.objs[key]
	kind, ns, name := u.GetKind(), u.GetNamespace(), u.GetName()
	blocks := slices.Clone(w.blocks[key])
	i := w.rng.IntN(len(blocks))
	var what string
	switch op := w.rng.IntN(7); {
	case op == 0:
		blocks, what = append(blocks, w.variant(kind, ns, blocks)), "add at the end"
	case op == 1:
		blocks, what = slices.Insert(blocks, 0, w.variant(kind, ns, blocks)), "insert at the top"
	case op == 2:
		blocks, what = slices.Insert(blocks, i, w.variant(kind, ns, blocks)), fmt.Sprintf("insert at #%d", i)
	case op == 3:
		blocks[i], what = w.variant(kind, ns, slices.Delete(slices.Clone(blocks), i, i+1)), fmt.Sprintf("replace #%d", i)
	case op == 4 && len(blocks) > 1:
		blocks, what = slices.Delete(blocks, i, i+1), fmt.Sprintf("remove #%d", i)
	case op == 5:
		name := fmt.Sprintf("new-%d", w.next)
		w.put(KindCluster, "", name, []string{w.variant(KindCluster, "", nil)})
		return "create " + SourceName(KindCluster, "", name)
	default:
		if len(w.objs) <= 2 {
			return w.change()
		}
		if err := w.inf[kind].Delete(u); err != nil {
			w.t.Fatal(err)
		}
		delete(w.objs, key)
		delete(w.blocks, key)
		return "delete " + key
	}
	w.put(kind, ns, name, blocks)
	return what + " of " + key
}

// An update of one policy object (a policy added, replaced or removed), a
// new object and a deleted one each load by the change
// (ReloadResult.Incremental), through the Source's offer to a store set up
// as kcedar serve sets it up (cedar/lint's checker and validator), into the
// set a fresh load of the objects builds (ids, positions, texts).
func TestObjectChangesLoadByTheChange(t *testing.T) {
	steps := 40
	if testing.Short() {
		steps = 15
	}
	cedarSchema := embeddedschema.Schema(t)
	lc, err := lint.NewChecker(cedarSchema)
	if err != nil {
		t.Fatal(err)
	}
	newStore := func() *store.Store {
		st := store.NewStore(nil, lc.Validator(), quietLogger())
		st.Checker, st.Schema = lc, cedarSchema
		return st
	}
	st := newStore()
	var last store.ReloadResult
	st.OnReload = func(r store.ReloadResult) { last = r }
	src := &Source{Store: st, Checker: NewCheckerFrom(lc), Logger: quietLogger()}
	src.init()
	inf := map[string]cache.Store{}
	for kind, gvr := range map[string]schema.GroupVersionResource{KindCluster: ClusterResource, KindNamespaced: NamespacedResource} {
		informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
		src.informer[gvr] = informer
		inf[kind] = informer.GetStore()
	}
	w := newObjectWorld(t, src.Checker, inf, 1)
	src.offer()
	if last.Err != nil || st.Current() == nil {
		t.Fatalf("the first offer: %+v", last)
	}
	for step := range steps {
		what := w.change()
		src.offer()
		if last.Err != nil || !last.Changed || !last.Incremental {
			t.Fatalf("step %d (%s): %+v, want a change loaded by the change", step, what, last)
		}
		fresh := newStore()
		srcs, refused := Compose(src.Checker, slices.Collect(func(yield func(*unstructured.Unstructured) bool) {
			for _, u := range w.objs {
				if !yield(u) {
					return
				}
			}
		}))
		if len(refused) > 0 {
			t.Fatalf("step %d (%s): refused %v", step, what, refused)
		}
		fresh.SetSources(srcs)
		if err := fresh.Load(); err != nil {
			t.Fatalf("step %d (%s): a fresh load: %v", step, what, err)
		}
		if diff := samePolicies(st.Current(), fresh.Current()); diff != "" {
			t.Fatalf("step %d (%s): %s", step, what, diff)
		}
	}
}

// samePolicies compares two sets policy by policy: ids, positions,
// sources, effects and texts.
func samePolicies(got, want *cedarlang.PolicySet) string {
	if got.Len() != want.Len() {
		return fmt.Sprintf("%d policies, want %d", got.Len(), want.Len())
	}
	for i, g := range got.Policies {
		w := want.Policies[i]
		if g.ID != w.ID || g.Source != w.Source || g.AST.Position != w.AST.Position || g.Effect != w.Effect || string(g.Text()) != string(w.Text()) {
			return fmt.Sprintf("policy %d is %s at %s, want %s at %s", i, g.ID, g.Source, w.ID, w.Source)
		}
	}
	return ""
}
