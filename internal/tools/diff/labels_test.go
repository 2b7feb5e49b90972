package diff

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// The leaves of the label generator: namespace labels, object labels (read
// by a list with a label selector), a name from a field selector, and an
// object condition that a mutation widens.
var labelLeaves = []string{
	`resource has namespaceObject && resource.namespaceObject.metadata has labels && resource.namespaceObject.metadata.labels.hasTag("team") && resource.namespaceObject.metadata.labels.getTag("team") == "a"`,
	`resource has namespaceObject && resource.namespaceObject.metadata has labels && resource.namespaceObject.metadata.labels.hasTag("restricted")`,
	`resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "agent"`,
	`!resource.named && resource.name == "web"`,
	`resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe"`,
	`resource.namespace == "ns1"`, `principal in k8s::Group::"ops"`,
}

// labelWidenings are edits of the leaves, applied either way: a condition
// widened or narrowed, a label value moved.
var labelWidenings = [][2]string{
	{`resource.object.v1.spec.nodeName == "safe"`, `resource.object.v1.spec.nodeName != ""`},
	{`&& resource.namespaceObject.metadata.labels.getTag("team") == "a"`, ""},
	{`getTag("team") == "a"`, `getTag("team") == "b"`},
	{`getTag("app") == "agent"`, `getTag("app") == "web"`},
	{`!resource.named && `, ""},
}

// genLabelPolicy is one random policy of the label generator.
func genLabelPolicy(rng *rand.Rand) string {
	effect := "permit"
	if rng.Intn(3) == 0 {
		effect = "forbid"
	}
	acts := []string{`action == k8s::Action::"get"`, `action in [k8s::Action::"list", k8s::Action::"watch"]`, `action == k8s::Action::"create"`, "action"}
	s := fmt.Sprintf("%s(%s, %s, resource is core::pods)", effect, principals[rng.Intn(len(principals))], acts[rng.Intn(len(acts))])
	for j := 1 + rng.Intn(2); j > 0; j-- {
		s += fmt.Sprintf(" when { %s }", labelLeaves[rng.Intn(len(labelLeaves))])
	}
	return s
}

// mutateLabels widens or narrows a condition, or mutates as mutate does.
func mutateLabels(rng *rand.Rand, ps []string) []string {
	out := append([]string(nil), ps...)
	i := rng.Intn(len(out))
	if rng.Intn(3) == 0 {
		return mutate(rng, out)
	}
	for _, k := range rng.Perm(len(labelWidenings)) {
		from, to := labelWidenings[k][0], labelWidenings[k][1]
		if rng.Intn(2) == 0 && to != "" {
			from, to = to, from
		}
		if strings.Contains(out[i], from) {
			out[i] = strings.Replace(out[i], from, to, 1)
			return out
		}
	}
	out[i] = genLabelPolicy(rng)
	return out
}

// labelNamespaces are the namespaces of the label universe: ns1 of team a,
// ns2 of team b and restricted, ns3 without labels (ns4 is unknown).
func labelNamespaces() entities.StaticNamespaces {
	ns := func(name string, labels map[string]any) map[string]any {
		meta := map[string]any{"name": name}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
	}
	return entities.StaticNamespaces{"ns1": ns("ns1", map[string]any{"team": "a"}),
		"ns2": ns("ns2", map[string]any{"team": "b", "restricted": "yes"}), "ns3": ns("ns3", nil)}
}

// labelUniverse is every request of the label generator's values: with
// and without a label selector, names from the request and from a field
// selector.
func labelUniverse() []*entities.Request {
	selectors := [][]entities.LabelRequirement{nil, {{Key: "app", Op: metav1.LabelSelectorOpIn, Values: []string{"agent"}}},
		{{Key: "app", Op: metav1.LabelSelectorOpIn, Values: []string{"web"}}}, {{Key: "app", Op: metav1.LabelSelectorOpExists}}}
	var out []*entities.Request
	for _, u := range []string{"alice", "bob", "system:serviceaccount:ns1:web"} {
		for _, g := range [][]string{nil, {"devs"}, {"ops"}} {
			for _, v := range []string{"get", "list", "watch", "create", "*"} {
				for _, ns := range []string{"", "ns1", "ns2", "ns3", "ns4"} {
					for _, n := range []string{"", "web", "api"} {
						for _, fromSel := range []bool{false, true} {
							for _, sel := range selectors {
								if (fromSel && n == "") || (sel != nil && v != "list" && v != "watch") {
									continue
								}
								out = append(out, &entities.Request{User: entities.UserInfo{Name: u, Groups: g}, Verb: v, ResourceRequest: true,
									Resource: "pods", Namespace: ns, Name: n, NameFromSelector: fromSel, LabelSelector: sel})
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestDiffLabelsProperty checks the regions where policies read namespace
// labels, object labels, resource.named and object conditions, against the
// label universe with its namespaces, over seeded mutations that widen and
// narrow those conditions. A list or watch with a label selector that a
// changed policy reading the object matches is not decided exactly; the
// other cases must be exact.
func TestDiffLabelsProperty(t *testing.T) {
	checkCasesIn(t, diffCases(2000)/4, 300, labelUniverse(), labelNamespaces(), 60, func(rng *rand.Rand) ([]string, []string) {
		oldPs := make([]string, 1+rng.Intn(3))
		for i := range oldPs {
			oldPs[i] = genLabelPolicy(rng)
		}
		return oldPs, mutateLabels(rng, oldPs)
	})
}

// podObjects are pods that tell the nodeName conditions apart.
var podObjects = []string{`{}`, `{"spec":{}}`, `{"spec":{"nodeName":"safe"}}`, `{"spec":{"nodeName":"other"}}`, `{"spec":{"nodeName":""}}`}

// checkConditions checks, for each region conditional on both sides whose
// new conditions the method proved no wider, that no object is allowed by
// the new set and not by the old one.
func (k *checker) checkConditions() {
	for _, g := range k.res.Regions {
		if g.Change.From != "Conditional" || g.Change.To != "Conditional" || g.MayWiden {
			continue
		}
		req := g.Example.Request()
		for _, obj := range podObjects {
			pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":%q}%s`, req.Namespace, strings.TrimPrefix(strings.TrimPrefix(obj, "{"), "}"))
			if obj != `{}` {
				pod = fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":%q},%s`, req.Namespace, strings.TrimPrefix(obj, "{"))
			} else {
				pod += "}"
			}
			adm := &conditions.Admission{Operation: "CREATE", Object: []byte(pod)}
			k.sw.cur = exampleNamespaces(g.Example)
			o := conditions.New(k.oldEng.(*engine.Engine), conditions.NewCodec(conditions.RandomKeyring())).Report(context.Background(), req, adm)
			n := conditions.New(k.newEng.(*engine.Engine), conditions.NewCodec(conditions.RandomKeyring())).Report(context.Background(), req, adm)
			if n.Outcome == "Allow" && o.Outcome != "Allow" {
				k.t.Fatalf("case %d: region %+v is not mayWiden, but %s is allowed only by the new set\nold:\n%s\nnew:\n%s", k.c, g, pod, text(k.oldPs), text(k.newPs))
			}
		}
	}
}
