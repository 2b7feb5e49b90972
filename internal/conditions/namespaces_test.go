package conditions

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// TestNamespaceObjectConditions: a create in a namespace unknown at
// authorization time gets conditions, evaluated with the namespace the
// callback's lookup knows.
func TestNamespaceObjectConditions(t *testing.T) {
	s := schematest.Schema()
	later := policytest.Namespaces{}
	e := newEngine(s, policytest.Set(t, policytest.TeamPolicies), engine.EngineOptions{Namespaces: later})
	req := policytest.ResourceRequest("u", []string{"team-a"}, "create", "", "pods", "", "new", "")
	d := e.Authorize(context.Background(), req)
	if !d.IsConditional() {
		t.Fatalf("create in an unknown namespace: %v, want conditional", d.Type())
	}
	enc := e.Encode(d, RequestBinding(req))
	data := &AdmissionData{Operation: "CREATE", Resource: "pods", APIVersion: "v1", Namespace: "new", Name: "p", User: &req.User,
		Object: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"new"}}`)}
	for _, tc := range []struct {
		ns   map[string]any
		want engine.DecisionType
	}{
		{nil, engine.DecisionNoOpinion},
		{policytest.NamespaceObject("new", "1", map[string]string{"team": "a"}), engine.DecisionAllow},
		{policytest.NamespaceObject("new", "1", map[string]string{"team": "b"}), engine.DecisionNoOpinion},
		{policytest.NamespaceObject("new", "1", map[string]string{"team": "a", "restricted": ""}), engine.DecisionDeny},
	} {
		if tc.ns == nil {
			delete(later, "new")
		} else {
			later["new"] = tc.ns
		}
		if got := e.EvaluateConditions(context.Background(), &enc, data); got.Type() != tc.want {
			t.Errorf("namespace %v: %v, want %v (%s)", tc.ns, got.Type(), tc.want, got.Reason())
		}
	}
}

// Property: for random policies over namespace labels, the engine agrees
// with the one-phase oracle when the namespace is known; when it is not
// (unknown to the lookup, or the request's namespace is open), an Allow
// holds for every namespace the request may land in, a Deny is required as
// soon as one of them is denied, and the conditions of a request admission
// sees decide exactly as the oracle does for the namespace the callback
// finds.
func TestNamespaceObjectProperty(t *testing.T) {
	s := schematest.Schema()
	rng := rand.New(rand.NewSource(15))
	cases := 3000
	if testing.Short() {
		cases = 300
	}
	universe := namespaceUniverse()
	names := []string{"ns1", "ns2"}
	checked := map[string]int{}
	for c := 0; c < cases; c++ {
		src := randomNamespacePolicies(rng)
		ps := policytest.Set(t, src)
		orc := policytest.OraclePolicies(ps.Policies)
		// The lookup knows some of the names.
		known := entities.StaticNamespaces{}
		for i, n := range names {
			if rng.Intn(3) > 0 {
				known[n] = universe[rng.Intn(len(universe))](n, fmt.Sprint(i+1))
			}
		}
		e := newEngine(s, ps, engine.EngineOptions{CacheSize: rng.Intn(2) * 64, Namespaces: known})
		user := []string{"alice", "bob"}[rng.Intn(2)]
		verb := []string{"list", "get", "create", "delete"}[rng.Intn(4)]
		ns := []string{"ns1", "ns2", ""}[rng.Intn(3)]
		name := "p"
		if verb == "list" || verb == "create" {
			name = ""
		}
		req := policytest.ResourceRequest(user, []string{"g"}, verb, "", "pods", "", ns, name)
		d := e.Authorize(context.Background(), req)
		oracleFor := func(ns string, obj map[string]any) string {
			r := *req
			r.Namespace = ns
			return policytest.NamespaceOracle(s, orc, &r, obj)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d: %s %s in %q (known %v): %s\npolicies:\n%s", c, user, verb, ns, known, fmt.Sprintf(format, args...), src)
		}
		if obj, ok := known[ns]; ok && ns != "" {
			// Known: exactly the one-phase decision (after conditions for
			// objects, which these policies do not read).
			got := d.FailureDecision().Type().String()
			if d.IsConditional() {
				got = e.EvaluateConditions(context.Background(), ptr(e.Encode(d, RequestBinding(req))), admissionData(req)).Type().String()
			}
			if want := oracleFor(ns, obj); got != want {
				fail("known namespace: %s, oracle %s", got, want)
			}
			checked["known"]++
			continue
		}
		// Unknown: every world the request may land in.
		var worlds []struct {
			ns  string
			obj map[string]any
		}
		for _, n := range names {
			if ns != "" && n != ns {
				continue
			}
			worlds = append(worlds, struct {
				ns  string
				obj map[string]any
			}{n, nil})
			for _, mk := range universe {
				worlds = append(worlds, struct {
					ns  string
					obj map[string]any
				}{n, mk(n, "9")})
			}
		}
		anyDeny, allAllow := false, true
		for _, w := range worlds {
			switch oracleFor(w.ns, w.obj) {
			case "Deny":
				anyDeny, allAllow = true, false
			case "NoOpinion":
				allAllow = false
			}
		}
		if d.IsConditional() {
			checked["conditional"]++
			for _, w := range worlds {
				at := entities.StaticNamespaces{}
				if w.obj != nil {
					at[w.ns] = w.obj
				}
				ev := New(engine.NewEngine(s, ps, engine.EngineOptions{Namespaces: at}), e.Codec())
				r := *req
				r.Namespace = w.ns
				// The API server authorizes a write in the namespace it
				// lands in: the conditions are bound to it.
				enc := e.Encode(d, RequestBinding(&r))
				got := ev.EvaluateConditions(context.Background(), &enc, admissionData(&r)).Type().String()
				if want := oracleFor(w.ns, w.obj); got != want {
					fail("conditions with namespace %v: %s, oracle %s", w.obj, got, want)
				}
			}
			continue
		}
		got := d.Type()
		switch {
		case got == engine.DecisionAllow && !allAllow:
			fail("Allow, but some namespace is not allowed")
		case anyDeny && got != engine.DecisionDeny:
			fail("%v, but some namespace is denied", got)
		}
		checked["unknown-"+got.String()]++
	}
	t.Logf("checked: %v", checked)
	if checked["known"] == 0 || checked["conditional"] == 0 || checked["unknown-Deny"] == 0 || checked["unknown-NoOpinion"] == 0 {
		t.Errorf("the generator misses a kind of case: %v", checked)
	}
}

func ptr[T any](v T) *T { return &v }

func admissionData(req *entities.Request) *AdmissionData {
	op := map[string]string{"create": "CREATE", "delete": "DELETE"}[req.Verb]
	name := req.Name
	if name == "" {
		name = "p"
	}
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q}}`, name, req.Namespace)
	d := &AdmissionData{Operation: op, Resource: "pods", APIVersion: "v1", Namespace: req.Namespace, Name: name, User: &req.User}
	if op == "CREATE" {
		d.Object = []byte(pod)
	} else {
		d.OldObject = []byte(pod)
	}
	return d
}

var nsLabelKeys = []string{"team", "env", "restricted"}

// namespaceUniverse lists Namespace objects over every assignment of the
// label keys (absent, "a", "b"), plus one without a labels field.
func namespaceUniverse() []func(name, rv string) map[string]any {
	out := []func(name, rv string) map[string]any{func(name, rv string) map[string]any { return policytest.NamespaceObject(name, rv, nil) }}
	n := 1
	for range nsLabelKeys {
		n *= 3
	}
	for i := 0; i < n; i++ {
		labels := map[string]string{}
		x := i
		for _, k := range nsLabelKeys {
			switch x % 3 {
			case 1:
				labels[k] = "a"
			case 2:
				labels[k] = "b"
			}
			x /= 3
		}
		out = append(out, func(name, rv string) map[string]any { return policytest.NamespaceObject(name, rv, labels) })
	}
	return out
}

func randomNamespacePolicies(rng *rand.Rand) string {
	return testgen.RandomPolicies(rng, 1+rng.Intn(4), func(rng *rand.Rand) string {
		principal := []string{"principal", `principal == k8s::User::"alice"`}[rng.Intn(2)]
		action := []string{"action", `action in [k8s::Action::"list", k8s::Action::"get"]`, `action == k8s::Action::"create"`, `action == k8s::Action::"delete"`}[rng.Intn(4)]
		resource := []string{"resource", "resource is core::pods"}[rng.Intn(2)]
		return principal + ", " + action + ", " + resource
	}, randomNamespaceExpr)
}

func randomNamespaceExpr(rng *rand.Rand) string {
	return testgen.RandomTree(rng, 2, namespaceLeaf)
}

func namespaceLeaf(rng *rand.Rand) string {
	const nsObj = "resource.namespaceObject"
	key := nsLabelKeys[rng.Intn(len(nsLabelKeys))]
	val := []string{"a", "b"}[rng.Intn(2)]
	guard := "resource has namespaceObject && " + nsObj + ".metadata has labels && " + nsObj + ".metadata.labels.hasTag(\"" + key + "\")"
	switch rng.Intn(9) {
	case 0:
		return "resource has namespaceObject"
	case 1:
		return "(" + guard + ")"
	case 2:
		return "(" + guard + " && " + nsObj + ".metadata.labels.getTag(\"" + key + "\") == \"" + val + "\")"
	case 3: // unguarded: fails when absent
		return nsObj + ".metadata.labels.getTag(\"" + key + "\") == \"" + val + "\""
	case 4:
		return "(resource has namespaceObject && " + nsObj + ".metadata.name == resource.namespace)"
	case 5:
		return `resource.namespace == "ns1"`
	case 6:
		return `principal.username == "alice"`
	case 7:
		return "(resource has namespaceObject && " + nsObj + ".metadata has labels && " + nsObj + ".metadata.labels.hasTag(\"" + key + "\") && " + nsObj + ".metadata.labels.getTag(\"" + key + "\") != \"" + val + "\")"
	}
	return "true"
}
