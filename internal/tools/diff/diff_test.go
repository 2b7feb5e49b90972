package diff

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

var (
	principals = []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"devs"`, `principal is k8s::ServiceAccount`,
		`principal == k8s::ServiceAccount::"system:serviceaccount:ns1:web"`}
	actions   = []string{"action", `action == k8s::Action::"get"`, `action in [k8s::Action::"get", k8s::Action::"list"]`}
	resources = []string{"resource is core::pods", "resource is core::secrets", "resource is core::nodes"}
	leaves    = []string{`resource.name == "web"`, `resource.name like "web-*"`, `resource.namespace == "ns1"`, `resource.namespace != "ns2"`,
		`principal.groups.contains("ops")`, `principal in k8s::Group::"ops"`, `context.verb == "list"`, `principal.username == "bob"`,
		`principal is k8s::ServiceAccount && principal.namespace == "ns1"`}
)

// genPolicy is one random policy (without its @id).
func genPolicy(rng *rand.Rand) string {
	effect := "permit"
	if rng.Intn(3) == 0 {
		effect = "forbid"
	}
	s := fmt.Sprintf("%s(%s, %s, %s)", effect, principals[rng.Intn(len(principals))], actions[rng.Intn(len(actions))], resources[rng.Intn(len(resources))])
	for j := rng.Intn(3); j > 0; j-- {
		clause := "when"
		if rng.Intn(4) == 0 {
			clause = "unless"
		}
		s += fmt.Sprintf(" %s { %s }", clause, leaves[rng.Intn(len(leaves))])
	}
	return s
}

// mutate changes one thing of ps: a literal, a permit added or removed, a
// forbid widened or removed, a condition edited, a scope moved, unless added.
func mutate(rng *rand.Rand, ps []string) []string {
	out := append([]string(nil), ps...)
	i := rng.Intn(len(out))
	switch rng.Intn(6) {
	case 0:
		for _, r := range [][2]string{{`"web"`, `"api"`}, {`"ns1"`, `"ns2"`}, {`"devs"`, `"ops"`}, {`"get"`, `"list"`}, {`"alice"`, `"bob"`}} {
			if strings.Contains(out[i], r[0]) {
				out[i] = strings.Replace(out[i], r[0], r[1], 1)
				return out
			}
		}
		out[i] = strings.Replace(out[i], "core::pods", "core::secrets", 1)
	case 1:
		out = append(out, genPolicy(rng))
	case 2:
		out = append(out[:i], out[i+1:]...)
	case 3:
		if head, _, ok := strings.Cut(out[i], ")"); ok {
			out[i] = head + ")"
		}
	case 4:
		out[i] = strings.Replace(out[i], resources[rng.Intn(3)], resources[rng.Intn(3)], 1)
		out[i] = strings.Replace(out[i], actions[1], actions[2], 1)
	default:
		out[i] += fmt.Sprintf(" unless { %s }", leaves[rng.Intn(len(leaves))])
	}
	return out
}

func text(ps []string) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "@id(\"p%d\")\n%s;\n", i, p)
	}
	return b.String()
}

// universe is every request built from the generator's literals, values
// matching and missing its like pattern, fresh and open values.
func universe() []*entities.Request {
	users := []string{"alice", "bob", "carol", "system:serviceaccount:ns1:web", "system:serviceaccount:ns1:zzz", "system:serviceaccount:x:y",
		"system:node:n1", "system:node:n2"}
	groupSets := [][]string{nil, {"devs"}, {"ops"}, {"devs", "ops"}, {"other"}, {"devs", "other"}}
	verbs := []string{"get", "list", "create", "*"}
	targets := [][2]string{{"", "pods"}, {"", "secrets"}, {"", "nodes"}, {"", "configmaps"}}
	nss := []string{"", "ns1", "ns2", "ns3"}
	names := []string{"", "web", "web-a", "xweb-", "api", "zzz"}
	var out []*entities.Request
	for _, u := range users {
		for _, g := range groupSets {
			for _, v := range verbs {
				for _, t := range targets {
					for _, ns := range nss {
						for _, n := range names {
							out = append(out, &entities.Request{User: entities.UserInfo{Name: u, Groups: g}, Verb: v, ResourceRequest: true,
								APIGroup: t[0], Resource: t[1], Namespace: ns, Name: n})
						}
					}
				}
			}
		}
	}
	return out
}

// checker compares one case's regions with decisions of both sets.
type checker struct {
	t              *testing.T
	c              int
	oldPs, newPs   []string
	res            *Result
	oldEng, newEng interface {
		Authorize(context.Context, *entities.Request) engine.Decision
	}
	// ns are the namespaces the engines and the regions are read with; sw
	// is the engines' lookup, switched to an example's namespace.
	ns entities.NamespaceLookup
	sw *switchNS
}

// switchNS is a Namespace lookup whose namespaces can be switched.
type switchNS struct{ cur entities.NamespaceLookup }

func (s *switchNS) Namespace(name string) (map[string]any, bool) {
	if s.cur == nil {
		return nil, false
	}
	return s.cur.Namespace(name)
}

// exampleNamespaces are namespaces where the example's namespace has the
// labels of its world (nil when the example has none).
func exampleNamespaces(e *Example) entities.NamespaceLookup {
	if e.NamespaceLabels == "" || e.NamespaceLabels == worldUnknown {
		return nil
	}
	labels := map[string]any{}
	if e.NamespaceLabels != worldNoLabels {
		labels["kcedar-other-label-test"] = "x"
	}
	for _, part := range strings.Split(e.NamespaceLabels, ",") {
		if k, v, ok := strings.Cut(part, "="); ok {
			labels[k] = v
		}
	}
	meta := map[string]any{"name": e.Namespace}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	return entities.StaticNamespaces{e.Namespace: {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}}
}

func newChecker(t *testing.T, c int, oldPs, newPs []string, ns entities.StaticNamespaces) (*checker, bool) {
	s := embeddedschema.Schema(t)
	oldSet, newSet := policytest.Set(t, text(oldPs)), policytest.Set(t, text(newPs))
	res := Compare(s, oldSet, newSet)
	var lookup entities.NamespaceLookup
	sw := &switchNS{}
	if ns != nil {
		lookup, sw.cur = ns, ns
	}
	k := &checker{t: t, c: c, oldPs: oldPs, newPs: newPs, res: res, oldEng: newEngine(s, oldSet, sw), newEng: newEngine(s, newSet, sw), ns: lookup, sw: sw}
	if len(res.Inexact) > 0 {
		// Not decided exactly: it must say so in a region, which
		// --exit-code counts whatever --fail-on says.
		if len(res.Regions) == 0 || slices.ContainsFunc(res.Regions, func(g Region) bool { return g.Exact }) {
			t.Fatalf("case %d: inexact (%v) but regions %+v", c, res.Inexact, res.Regions)
		}
		return nil, false
	}
	return k, true
}

// check fails when req differs but lies in no region, lies in a region
// but does not differ, or (mustDiffer, an example) does not differ.
func (k *checker) check(req *entities.Request, mustDiffer bool) {
	ctx := context.Background()
	differs := decisionKey(k.oldEng.Authorize(ctx, req)) != decisionKey(k.newEng.Authorize(ctx, req))
	in := false
	for i := range k.res.Regions {
		if got, _ := k.res.ContainsIn(i, req, k.ns); got {
			in = true
		}
	}
	if len(req.LabelSelector) > 0 && !differs {
		// Regions are about requests without a label selector: one with a
		// selector may change less, never where no region is.
		return
	}
	what := ""
	switch {
	case mustDiffer && !differs:
		what = "example does not differ"
	case differs && !in:
		what = "differs but is in no region"
	case in && !differs:
		what = "is in a region but does not differ"
	default:
		return
	}
	k.t.Fatalf("case %d: %+v %s\nold:\n%s\nnew:\n%s\nregions: %+v", k.c, req, what, text(k.oldPs), text(k.newPs), k.res.Regions)
}

// checkCases runs cases generated by gen against a sample of all, and
// checks that under 1% are not decided exactly.
func checkCases(t *testing.T, cases, sample int, all []*entities.Request, gen func(*rand.Rand) (oldPs, newPs []string)) {
	checkCasesIn(t, cases, sample, all, nil, 1, gen)
}

// checkCasesIn is checkCases with the namespaces ns, allowing maxInexact
// percent of the cases not decided exactly.
func checkCasesIn(t *testing.T, cases, sample int, all []*entities.Request, ns entities.StaticNamespaces, maxInexact int,
	gen func(*rand.Rand) (oldPs, newPs []string)) {
	rng := rand.New(rand.NewSource(22))
	inexact := 0
	for c := 0; c < cases; c++ {
		oldPs, newPs := gen(rng)
		k, exact := newChecker(t, c, oldPs, newPs, ns)
		if !exact {
			inexact++
			continue
		}
		k.checkConditions()
		for _, g := range k.res.Regions {
			k.sw.cur, k.ns = exampleNamespaces(g.Example), exampleNamespaces(g.Example)
			k.check(g.Example.Request(), true)
		}
		if ns != nil {
			k.sw.cur, k.ns = ns, ns
		} else {
			k.sw.cur, k.ns = nil, nil
		}
		for i := 0; i < sample; i++ {
			k.check(all[rng.Intn(len(all))], false)
		}
	}
	t.Logf("%d cases, %d not decided exactly (%.2f%%)", cases, inexact, 100*float64(inexact)/float64(cases))
	if inexact*100 > cases*maxInexact {
		t.Fatalf("%d of %d cases not decided exactly: over %d%%", inexact, cases, maxInexact)
	}
}

// diffCases is the number of generated cases: KCEDAR_DIFF_CASES, else
// def.
func diffCases(def int) int {
	if n, err := strconv.Atoi(os.Getenv("KCEDAR_DIFF_CASES")); err == nil {
		return n
	}
	return def
}

// TestDiffProperty checks the reported regions against every request of a
// sample of the universe, decided with both sets, over seeded mutations.
func TestDiffProperty(t *testing.T) {
	checkCases(t, diffCases(2000), 300, universe(), func(rng *rand.Rand) ([]string, []string) {
		oldPs := make([]string, 1+rng.Intn(4))
		for i := range oldPs {
			oldPs[i] = genPolicy(rng)
		}
		return oldPs, mutate(rng, oldPs)
	})
}

// genPinned is a permit of one group pinned to one namespace, as RBAC
// RoleBindings convert, or now and then an unpinned permit or a forbid.
func genPinned(rng *rand.Rand) string {
	verbs := []string{`action in [k8s::Action::"get", k8s::Action::"list"]`, `action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"delete"]`, `action in k8s::Action::"*"`}
	head := fmt.Sprintf("(principal in k8s::Group::\"g%d\", %s, resource is core::pods)", rng.Intn(4), verbs[rng.Intn(len(verbs))])
	switch rng.Intn(8) {
	case 0:
		return "permit" + head
	case 1:
		return "forbid" + head + fmt.Sprintf(" when { resource.name == \"n%d\" }", rng.Intn(2))
	}
	return "permit" + head + fmt.Sprintf(" when { resource.namespace == \"ns%d\" }", rng.Intn(4))
}

// pinnedUniverse is every request of the pinned generator's values, with
// every combination of its groups.
func pinnedUniverse() []*entities.Request {
	var out []*entities.Request
	for mask := 0; mask < 1<<5; mask++ {
		var groups []string
		for i := 0; i < 5; i++ {
			if mask&(1<<i) != 0 {
				groups = append(groups, fmt.Sprintf("g%d", i))
			}
		}
		for _, v := range []string{"get", "list", "create", "update", "delete", "deletecollection", "*"} {
			for _, ns := range []string{"", "ns0", "ns1", "ns2", "ns3", "ns9"} {
				for _, n := range []string{"", "n0", "n1", "x"} {
					out = append(out, &entities.Request{User: entities.UserInfo{Name: "alice", Groups: groups}, Verb: v, ResourceRequest: true,
						Resource: "pods", Namespace: ns, Name: n})
				}
			}
		}
	}
	return out
}

// TestDiffPinnedProperty checks the regions where many group permits are
// pinned to namespaces (their groups are left out at open-namespace points,
// run.onlyAddsConditions): one pin moved, a permit added or removed.
func TestDiffPinnedProperty(t *testing.T) {
	checkCases(t, diffCases(2000)/4, 300, pinnedUniverse(), func(rng *rand.Rand) ([]string, []string) {
		oldPs := make([]string, 3+rng.Intn(8))
		for i := range oldPs {
			oldPs[i] = genPinned(rng)
		}
		newPs := append([]string(nil), oldPs...)
		i := rng.Intn(len(newPs))
		switch rng.Intn(3) {
		case 0:
			newPs[i] = strings.Replace(newPs[i], fmt.Sprintf("ns%d", rng.Intn(4)), fmt.Sprintf("ns%d", rng.Intn(4)), 1)
		case 1:
			newPs = append(newPs[:i], newPs[i+1:]...)
		default:
			newPs = append(newPs, genPinned(rng))
		}
		return oldPs, newPs
	})
}

func TestSelfDiffIsEmpty(t *testing.T) {
	set := policytest.Set(t, testgen.RBACLike(200))
	if res := Compare(embeddedschema.Schema(t), set, set); len(res.Regions) != 0 || len(res.Added)+len(res.Removed) != 0 {
		t.Fatalf("self diff: %+v", res)
	}
}

func benchEdit(b *testing.B, n int) {
	s := embeddedschema.Schema(b)
	text := testgen.RBACLike(n)
	oldSet := policytest.Set(b, text)
	newSet := policytest.Set(b, strings.Replace(text, `resource.namespace == "ns-5" }`, `resource.namespace == "ns-6" }`, 1))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := Compare(s, oldSet, newSet)
		if len(res.Regions) == 0 || len(res.Inexact) > 0 {
			b.Fatalf("no change found, or not decided exactly: %v", res.Inexact)
		}
	}
}

func BenchmarkDiff1000(b *testing.B)  { benchEdit(b, 1000) }
func BenchmarkDiff10000(b *testing.B) { benchEdit(b, 10000) }
