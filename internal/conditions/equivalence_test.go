package conditions

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
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
	// last is the one-phase answer of the latest check, lastWire its
	// two-phase answer as the callback received it.
	last     oracle.Result
	lastWire wire.ConditionsAwareDecision
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
	az := New(engine.NewEngine(h.schema, set, engine.EngineOptions{}), h.codec)
	if c.req.User.Name == "alice" {
		// Half the cases memoize, half compute from scratch.
		if cached, ok := h.engines[src]; ok {
			az = cached
		} else {
			az = New(engine.NewEngine(h.schema, set, engine.EngineOptions{CacheSize: 1 << 16}), h.codec)
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
	h.last = oracle.Evaluate(policytest.OraclePolicies(az.Policies().Policies), ents, ents.Principal.UID, schemagen.ActionUID(c.req.Verb), ents.Resource.UID)
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
	h.lastWire = back
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

// genAdmissionCase is a generated request on pods (testgen.ObjectAdmission)
// and the admission data of it.
func genAdmissionCase(rng *rand.Rand) admissionCase {
	c := testgen.ObjectAdmission(rng)
	data := &AdmissionData{Operation: c.Operation, APIVersion: "v1", Resource: "pods", Subresource: c.Subresource,
		Namespace: c.Namespace, Name: c.Name, User: &c.Req.User, Object: c.Object, OldObject: c.OldObject}
	return admissionCase{req: c.Req, data: data}
}

// genObjectPolicies is testgen.ObjectPolicies.
func genObjectPolicies(rng *rand.Rand, n int) string { return testgen.ObjectPolicies(rng, n) }
