package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// KEP requirement 1, as a property: for generated policies x requests x
// objects, the two-phase answer (SubjectAccessReview -> signed conditions ->
// JSON -> callback with the admission data) equals the one-phase answer of
// Cedar with everything known.
func TestTwoPhaseEqualsOnePhase(t *testing.T) {
	rng := rand.New(rand.NewSource(5681))
	h := newEquivalenceHarness(t)
	sets, perSet := 400, 30
	if testing.Short() {
		sets = 60
	}
	stats := map[string]int{}
	for i := 0; i < sets; i++ {
		src := genObjectPolicies(rng, 1+rng.Intn(5))
		for j := 0; j < perSet; j++ {
			c := genAdmissionCase(rng)
			kind, err := h.check(src, c)
			if err != nil {
				t.Fatalf("set %d case %d: %v\npolicies:\n%s", i, j, err, src)
			}
			stats[kind]++
		}
	}
	t.Logf("cases by authorization-time outcome: %v", stats)
	if stats["conditional"] < sets*perSet/10 {
		t.Errorf("only %d conditional outcomes: the generator does not exercise conditions", stats["conditional"])
	}
}

// FuzzTwoPhaseEqualsOnePhase is the same property driven by the fuzzer:
// the seed picks policies, the request and the objects.
func FuzzTwoPhaseEqualsOnePhase(f *testing.F) {
	for _, seed := range []int64{1, 2, 3, 42, 5681} {
		f.Add(seed, uint8(3))
	}
	h := newEquivalenceHarness(f)
	f.Fuzz(func(t *testing.T, seed int64, n uint8) {
		rng := rand.New(rand.NewSource(seed))
		src := genObjectPolicies(rng, 1+int(n%6))
		for j := 0; j < 5; j++ {
			if _, err := h.check(src, genAdmissionCase(rng)); err != nil {
				t.Fatalf("%v\npolicies:\n%s", err, src)
			}
		}
	})
}

type equivalenceHarness struct {
	schema *schemagen.Schema
	codec  *Codec
	ev     *Evaluator
	// engines keeps one caching engine per policy set, shared by all of its
	// cases: memoized residuals must never leak between requests.
	engines map[string]*Engine
	// last is the one-phase answer of the latest check.
	last oracle.Result
}

func newEquivalenceHarness(t testing.TB) *equivalenceHarness {
	s := schematest.Schema()
	codec := NewCodec(RandomKeyring())
	return &equivalenceHarness{schema: s, codec: codec, ev: &Evaluator{Schema: s, Codec: codec}, engines: map[string]*Engine{}}
}

// admissionCase is a SubjectAccessReview and what admission then sees.
type admissionCase struct {
	req  *entities.Request
	data *AdmissionData
}

func (h *equivalenceHarness) check(src string, c admissionCase) (string, error) {
	ps, err := cedarlang.ParsePolicies("gen.cedar", []byte(src))
	if err != nil {
		return "", err
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		return "", err
	}
	az := NewEngine(h.schema, set, h.codec, EngineOptions{})
	if c.req.User.Name == "alice" {
		// Half the cases memoize, half compute from scratch.
		if cached, ok := h.engines[src]; ok {
			az = cached
		} else {
			az = NewEngine(h.schema, set, h.codec, EngineOptions{CacheSize: 1 << 16})
			if len(h.engines) > 64 {
				clear(h.engines)
			}
			h.engines[src] = az
		}
	}

	// One phase: everything known, every policy evaluated.
	target := entities.ResolveTarget(h.schema, c.req)
	env, err := h.ev.Env(target.EntityType, c.data)
	if err != nil {
		return "", fmt.Errorf("building the one-phase env: %v", err)
	}
	known := *c.req
	known.Name, known.Namespace = c.data.Name, c.data.Namespace
	ents := env.Entities.(*entities.Entities)
	ents.Principal = entities.PrincipalEntity(c.req.User)
	h.last = oracle.Evaluate(oraclePolicies(az.Policies().Policies), ents, ents.Principal.UID, schemagen.ActionUID(c.req.Verb), ents.Resource.UID)
	one := h.last.Decision

	// Two phases: authorize with conditions, send them over JSON, evaluate.
	out := az.Authorize(context.Background(), c.req)
	kind := out.Type().String()
	if out.IsConditional() {
		kind = "conditional"
	}
	// An API server's SubjectAccessReview for a write names the namespace
	// the admission request is in (c.req may leave it open).
	b := RequestBinding(c.req)
	b.Namespace = c.data.Namespace
	dec := az.Encode(out, b)
	if err := wire.Validate(&dec); err != nil {
		return "", fmt.Errorf("upstream would reject the decision for %s: %v", c.req, err)
	}
	wireJSON, err := json.Marshal(dec)
	if err != nil {
		return "", err
	}
	var back wire.ConditionsAwareDecision
	if err := json.Unmarshal(wireJSON, &back); err != nil {
		return "", err
	}
	v := h.ev.EvaluateDecision(&back, c.data)
	if v.Type().String() != one {
		return "", fmt.Errorf("request %s, operation %s, name %q, namespace %q\nobject: %s\noldObject: %s\ntwo-phase %v (%s; %s) != one-phase %v\nauthorization-time decision: %s",
			c.req, c.data.Operation, c.data.Name, c.data.Namespace, c.data.Object, c.data.OldObject, v.Type(), v.Reason(), v.EvaluationError(), one, wireJSON)
	}
	for _, cond := range conditionsOf(back) {
		if len(cond.Condition) > MaxConditionBytes {
			return "", fmt.Errorf("condition %s is %d bytes", cond.ID, len(cond.Condition))
		}
	}
	return kind, nil
}

func conditionsOf(d wire.ConditionsAwareDecision) []wire.Condition {
	if d.ConditionsMap == nil {
		return nil
	}
	m := d.ConditionsMap
	return append(append(append([]wire.Condition(nil), m.DenyConditions...), m.NoOpinionConditions...), m.AllowConditions...)
}

var (
	eqNodes      = []string{"n1", "n2"}
	eqEnvs       = []string{"prod", "dev"}
	eqNames      = []string{"web-1", "db-1"}
	eqNamespaces = []string{"team-a", "team-b"}
)

func genObjectPolicies(rng *rand.Rand, n int) string {
	atoms := []func() string{
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == %q)`, pick(rng, eqNodes))
		},
		func() string {
			return fmt.Sprintf(`(resource has oldObject && resource.oldObject has v1 && resource.oldObject.v1 has spec && resource.oldObject.v1.spec has nodeName && resource.oldObject.v1.spec.nodeName == %q)`, pick(rng, eqNodes))
		},
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env") == %q)`, pick(rng, eqEnvs))
		},
		func() string {
			return `(resource has object && resource has oldObject && resource.object.metadata has labels && resource.oldObject.metadata has labels && resource.object.metadata.labels == resource.oldObject.metadata.labels)`
		},
		func() string {
			return `(resource has object && resource has oldObject && resource.object has v1 && resource.oldObject has v1 && resource.object.v1 has spec && resource.oldObject.v1 has spec && resource.object.v1.spec == resource.oldObject.v1.spec)`
		},
		func() string { return `resource has oldObject` },
		func() string { return `!(resource has oldObject)` },
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has priority && resource.object.v1.spec.priority + 1 > 5)`
		},
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object.metadata has finalizers && resource.object.metadata.finalizers.contains(%q))`, pick(rng, []string{"a/x", "b/y"}))
		},
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has command && resource.object.v1.command.contains("sh"))`
		},
		func() string { return fmt.Sprintf(`resource.name like %q`, pick(rng, []string{"web-*", "*-1"})) },
		func() string {
			return fmt.Sprintf(`(resource has namespace && resource.namespace == %q)`, pick(rng, eqNamespaces))
		},
		func() string { return fmt.Sprintf(`principal.username == %q`, pick(rng, []string{"alice", "bob"})) },
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has containers && resource.object.v1.spec.containers.isEmpty())`
		},
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		effect := "permit"
		if rng.Intn(10) < 3 {
			effect = "forbid"
		}
		action := pick(rng, []string{"action", `action == k8s::Action::"create"`, `action in [k8s::Action::"update", k8s::Action::"patch"]`, `action in [k8s::Action::"delete", k8s::Action::"deletecollection"]`, `action == k8s::Action::"get"`})
		resource := pick(rng, []string{"resource", "resource is core::pods", "resource is core::pods_exec"})
		principal := pick(rng, []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`})
		var conds []string
		k := rng.Intn(4)
		for j := 0; j < k; j++ {
			a := atoms[rng.Intn(len(atoms))]()
			if rng.Intn(5) == 0 {
				a = "!(" + a + ")"
			}
			conds = append(conds, a)
		}
		op := pick(rng, []string{" && ", " || "})
		fmt.Fprintf(&b, "@id(\"g%d\")\n%s(%s, %s, %s)", i, effect, principal, action, resource)
		if len(conds) > 0 {
			kw := "when"
			if rng.Intn(6) == 0 {
				kw = "unless"
			}
			fmt.Fprintf(&b, " %s { %s }", kw, strings.Join(conds, op))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

func genPod(rng *rand.Rand, name, ns string) []byte {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": ns}}
	md := pod["metadata"].(map[string]any)
	if rng.Intn(3) > 0 {
		md["labels"] = map[string]any{"env": pick(rng, eqEnvs)}
	}
	if rng.Intn(3) == 0 {
		md["finalizers"] = []any{pick(rng, []string{"a/x", "b/y"})}
	}
	spec := map[string]any{}
	if rng.Intn(4) > 0 {
		spec["nodeName"] = pick(rng, eqNodes)
	}
	if rng.Intn(3) == 0 {
		spec["priority"] = pick(rng, []any{0, 10, json.Number("9223372036854775807")})
	}
	if rng.Intn(2) == 0 {
		spec["containers"] = []any{map[string]any{"name": "c", "image": "nginx"}}
	} else if rng.Intn(2) == 0 {
		spec["containers"] = []any{}
	}
	if rng.Intn(6) > 0 {
		pod["spec"] = spec
	}
	if rng.Intn(10) == 0 {
		pod["apiVersion"] = "v2" // a version the schema does not serve
	}
	b, _ := json.Marshal(pod)
	return b
}

func genAdmissionCase(rng *rand.Rand) admissionCase {
	user := entities.UserInfo{Name: pick(rng, []string{"alice", "bob"})}
	if rng.Intn(2) == 0 {
		user.Groups = []string{"dev"}
	}
	verb := pick(rng, []string{"create", "update", "patch", "delete", "deletecollection", "exec-get", "exec-create"})
	name, ns := pick(rng, eqNames), pick(rng, eqNamespaces)
	req := &entities.Request{User: user, ResourceRequest: true, Resource: "pods", APIVersion: "v1", Namespace: ns, Name: name}
	data := &AdmissionData{APIVersion: "v1", Resource: "pods", Namespace: ns, Name: name, User: &user}
	if rng.Intn(3) == 0 || verb == "deletecollection" {
		req.Name = "" // open name: all names, or not known yet
	}
	if rng.Intn(4) == 0 {
		req.Namespace = ""
	}
	switch verb {
	case "create":
		req.Verb, data.Operation, data.Object = verb, "CREATE", genPod(rng, name, ns)
	case "update", "patch":
		req.Verb = verb
		if rng.Intn(5) == 0 { // the update creates the object
			data.Operation, data.Object = "CREATE", genPod(rng, name, ns)
		} else {
			data.Operation, data.Object, data.OldObject = "UPDATE", genPod(rng, name, ns), genPod(rng, name, ns)
		}
	case "delete", "deletecollection":
		req.Verb, data.Operation, data.OldObject = verb, "DELETE", genPod(rng, name, ns)
	case "exec-get", "exec-create":
		req.Verb = strings.TrimPrefix(verb, "exec-")
		req.Subresource, data.Subresource = "exec", "exec"
		opts := map[string]any{"apiVersion": "v1", "kind": "PodExecOptions", "command": []any{pick(rng, []string{"sh", "ls"})}}
		b, _ := json.Marshal(opts)
		data.Operation, data.Object = "CONNECT", b
	}
	return admissionCase{req: req, data: data}
}
