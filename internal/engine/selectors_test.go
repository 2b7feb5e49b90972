package engine

import (
	"context"
	"math/rand"
	"slices"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

const agentPolicies = `
@id("agent-pods")
permit(principal == k8s::User::"agent", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "agent" };
`

func listWithSelector(user, ns string, sel ...metav1.LabelSelectorRequirement) *entities.Request {
	spec := &authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
		Verb: "list", Version: "v1", Resource: "pods", Namespace: ns}}
	if len(sel) > 0 {
		spec.ResourceAttributes.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: sel}
	}
	req, err := entities.RequestFromSAR(spec)
	if err != nil {
		panic(err)
	}
	return req
}

func in(k string, vs ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: vs}
}

func TestLabelSelectorConfinesReads(t *testing.T) {
	e := NewEngine(schematest.Schema(), policytest.Set(t, agentPolicies), EngineOptions{CacheSize: 64})
	for _, tc := range []struct {
		name string
		sel  []metav1.LabelSelectorRequirement
		want DecisionType
	}{
		{"app=agent", []metav1.LabelSelectorRequirement{in("app", "agent")}, DecisionAllow},
		{"app=agent,tier=x", []metav1.LabelSelectorRequirement{in("app", "agent"), in("tier", "x")}, DecisionAllow},
		{"no selector", nil, DecisionNoOpinion},
		{"app in (agent,web)", []metav1.LabelSelectorRequirement{in("app", "agent", "web")}, DecisionNoOpinion},
		{"app exists", []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}, DecisionNoOpinion},
		{"app!=web", []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}, DecisionNoOpinion},
		{"tier=agent", []metav1.LabelSelectorRequirement{in("tier", "agent")}, DecisionNoOpinion},
	} {
		// Twice: the second answer comes from the decision cache.
		for i := 0; i < 2; i++ {
			if d := e.Authorize(context.Background(), listWithSelector("agent", "ns", tc.sel...)); d.Type() != tc.want {
				t.Errorf("%s: %v, want %v", tc.name, d.Type(), tc.want)
			}
		}
	}
}

var objLabelKeys = []string{"app", "tier"}
var objLabelValues = []string{"agent", "web"}

// Property: for random policies over object (and namespace) labels and
// random selectors, a list with a selector is allowed only if the one-phase
// decision allows every object of a universe the selector admits, and
// denied whenever it denies one of them.
func TestLabelSelectorProperty(t *testing.T) {
	s := schematest.Schema()
	rng := rand.New(rand.NewSource(4601))
	cases := 3000
	if testing.Short() {
		cases = 300
	}
	// The universe: every assignment of the keys (absent or a value), plus
	// an extra label, and an object without labels.
	var universe []map[string]string
	universe = append(universe, nil)
	n := 1
	for range objLabelKeys {
		n *= len(objLabelValues) + 1
	}
	for i := 0; i < n; i++ {
		for _, extra := range []bool{false, true} {
			l := map[string]string{}
			x := i
			for _, k := range objLabelKeys {
				if j := x % (len(objLabelValues) + 1); j > 0 {
					l[k] = objLabelValues[j-1]
				}
				x /= len(objLabelValues) + 1
			}
			if extra {
				l["other"] = "x"
			}
			universe = append(universe, l)
		}
	}
	nsObj := policytest.NamespaceObject("ns", "1", map[string]string{"team": "a"})
	lookup := entities.StaticNamespaces{"ns": nsObj}
	counts := map[string]int{}
	for c := 0; c < cases; c++ {
		src := randomSelectorPolicies(rng)
		ps := policytest.Set(t, src)
		orc := policytest.OraclePolicies(ps.Policies)
		e := NewEngine(s, ps, EngineOptions{CacheSize: 64, Namespaces: lookup})
		sel := randomSelector(rng)
		user := []string{"agent", "bob"}[rng.Intn(2)]
		req := listWithSelector(user, "ns", sel...)
		got := e.Authorize(context.Background(), req)
		allAllow, anyDeny, admitted := true, false, 0
		for _, l := range universe {
			if !selectorAdmits(sel, l) {
				continue
			}
			admitted++
			switch objectOracle(s, orc, req, l, nsObj) {
			case "Deny":
				anyDeny, allAllow = true, false
			case "NoOpinion":
				allAllow = false
			}
		}
		fail := func(msg string) {
			t.Fatalf("case %d: %s lists pods with selector %v: %v: %s\npolicies:\n%s", c, user, sel, got.Type(), msg, src)
		}
		switch {
		case got.IsAllowed() && !allAllow:
			fail("Allow, but an admitted object is not allowed")
		case anyDeny && !got.IsDenied():
			fail("an admitted object is denied")
		}
		counts[got.Type().String()]++
		if got.IsAllowed() && slices.ContainsFunc(sel, func(r metav1.LabelSelectorRequirement) bool { return r.Key == "app" }) {
			counts["allowed-with-app-selector"]++
		}
	}
	t.Logf("decisions: %v", counts)
	if counts["allowed-with-app-selector"] == 0 || counts["Deny"] == 0 || counts["NoOpinion"] == 0 {
		t.Errorf("the generator misses a kind of case: %v", counts)
	}
}

// selectorAdmits is the labels.Selector semantics of the requirements.
func selectorAdmits(sel []metav1.LabelSelectorRequirement, labels map[string]string) bool {
	for _, r := range sel {
		v, has := labels[r.Key]
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if !has || !slices.Contains(r.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if has && slices.Contains(r.Values, v) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !has {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if has {
				return false
			}
		}
	}
	return true
}

// objectOracle is the one-phase decision of req for one listed object.
func objectOracle(s *schemagen.Schema, orc *oracle.Policies, req *entities.Request, labels map[string]string, ns map[string]any) string {
	named := *req // the listed object's name
	named.Name = "p"
	req = &named
	target := entities.ResolveTarget(s, req)
	attrs := target.Attributes(req, nil, nil)
	conv := entities.NewObjectConverter(s)
	md := map[string]any{"name": "p", "namespace": req.Namespace}
	if labels != nil {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		md["labels"] = l
	}
	attrs[schemagen.AttrObject] = conv.Object(target.Resource, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md})
	attrs[schemagen.AttrNamespaceObject] = conv.NamespaceObject(policytest.RoundTrip(ns))
	ents := &entities.Entities{Principal: entities.PrincipalEntity(req.User), Resource: types.Entity{UID: target.EntityUID(req), Attributes: types.NewRecord(attrs)}, Maps: conv.Maps}
	return oracle.Evaluate(orc, ents, ents.Principal.UID, schemagen.ActionUID(req.Verb), target.EntityUID(req)).Decision
}

func randomSelector(rng *rand.Rand) []metav1.LabelSelectorRequirement {
	var out []metav1.LabelSelectorRequirement
	for i := rng.Intn(3); i >= 0; i-- {
		k := append(objLabelKeys, "other")[rng.Intn(3)]
		r := metav1.LabelSelectorRequirement{Key: k}
		switch rng.Intn(5) {
		case 0, 1:
			r.Operator = metav1.LabelSelectorOpIn
			r.Values = []string{objLabelValues[rng.Intn(2)]}
			if rng.Intn(3) == 0 {
				r.Values = append(r.Values, objLabelValues[rng.Intn(2)])
			}
		case 2:
			r.Operator = metav1.LabelSelectorOpNotIn
			r.Values = []string{objLabelValues[rng.Intn(2)]}
		case 3:
			r.Operator = metav1.LabelSelectorOpExists
		default:
			r.Operator = metav1.LabelSelectorOpDoesNotExist
		}
		out = append(out, r)
	}
	return out
}

func randomSelectorPolicies(rng *rand.Rand) string {
	return testgen.RandomPolicies(rng, 1+rng.Intn(3), func(rng *rand.Rand) string {
		principal := []string{"principal", `principal == k8s::User::"agent"`}[rng.Intn(2)]
		action := []string{"action", `action == k8s::Action::"list"`, `action == k8s::Action::"get"`}[rng.Intn(3)]
		return principal + ", " + action + ", resource is core::pods"
	}, randomObjectExpr)
}

func randomObjectExpr(rng *rand.Rand) string {
	return testgen.RandomTree(rng, 2, objectLeaf)
}

func objectLeaf(rng *rand.Rand) string {
	const labels = "resource.object.metadata.labels"
	k := objLabelKeys[rng.Intn(len(objLabelKeys))]
	v := objLabelValues[rng.Intn(len(objLabelValues))]
	guard := "resource has object && resource.object.metadata has labels && " + labels + ".hasTag(\"" + k + "\")"
	switch rng.Intn(9) {
	case 0:
		return "resource has object"
	case 1:
		return "(" + guard + ")"
	case 2, 3:
		return "(" + guard + " && " + labels + ".getTag(\"" + k + "\") == \"" + v + "\")"
	case 4: // unguarded
		return labels + ".getTag(\"" + k + "\") == \"" + v + "\""
	case 5:
		return "(resource has namespaceObject && resource.namespaceObject.metadata.labels.hasTag(\"team\"))"
	case 6:
		return "(resource has object && resource.object.metadata.name == \"p\")"
	case 7:
		if rng.Intn(2) == 0 {
			return `resource.name == "p"`
		}
	}
	return `principal.username == "agent"`
}
