package conditions

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/oracle"
)

// Two-phase equals one-phase also where evaluation errors: the
// generator mixes arithmetic near the 64-bit limits, extension constructors
// and methods on good and bad strings, like, containsAll/containsAny, getTag
// guarded and unguarded, and several when/unless clauses per policy, over
// objects whose fields make them fail. Every forbid that errors in one phase
// (kcedar: Deny) must deny in two.
func TestTwoPhaseEqualsOnePhaseWithErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	h := newEquivalenceHarness(t)
	sets, perSet := 1000, 21
	if testing.Short() {
		sets = 100
	}
	stats := map[string]int{}
	withErrors, erroringForbidDenies := 0, 0
	for i := 0; i < sets; i++ {
		src := genErrorPolicies(rng, 1+rng.Intn(5))
		for j := 0; j < perSet; j++ {
			c := genAdmissionCase(rng)
			addErrorProneFields(rng, c)
			kind, err := h.check(src, c)
			if err != nil {
				t.Fatalf("set %d case %d: %v\npolicies:\n%s", i, j, err, src)
			}
			stats[kind]++
			if len(h.last.Errors) > 0 {
				withErrors++
				if h.last.Decision == "Deny" && erroringForbid(h.last) {
					erroringForbidDenies++
				}
			}
		}
	}
	total := sets * perSet
	t.Logf("%d cases: %v; %d with evaluation errors in one phase, %d denied by an erroring forbid", total, stats, withErrors, erroringForbidDenies)
	if withErrors < total/20 || erroringForbidDenies < total/100 {
		t.Errorf("the generator does not exercise errors: %d cases with errors, %d erroring forbids", withErrors, erroringForbidDenies)
	}
	if stats["conditional"] < total/10 {
		t.Errorf("only %d conditional outcomes", stats["conditional"])
	}
}

// erroringForbid reports whether a one-phase Deny came from a forbid that
// failed to evaluate.
func erroringForbid(r oracle.Result) bool {
	for _, id := range r.Policies {
		for _, e := range r.Errors {
			if strings.HasPrefix(e, "policy "+id+": ") {
				return true
			}
		}
	}
	return false
}

func jsonNumber(s string) json.Number { return json.Number(s) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func genErrorPolicies(rng *rand.Rand, n int) string {
	guard := func(path string) string {
		// resource.object.metadata.x -> resource has object && resource.object.metadata has x
		parts := strings.Split(path, ".")
		var g []string
		for i := 1; i < len(parts); i++ {
			g = append(g, strings.Join(parts[:i], ".")+" has "+parts[i])
		}
		return strings.Join(g, " && ")
	}
	obj := pick(rng, []string{"object", "oldObject"})
	atoms := []func() string{
		// Arithmetic near the 64-bit limits.
		func() string {
			p := "resource." + obj + ".metadata.generation"
			return fmt.Sprintf("(%s && %s %s %d %s 0)", guard(p), p, pick(rng, []string{"*", "+", "-"}),
				pickInt(rng, []int64{9223372036854775807, 2, -9223372036854775807, 1 << 62}), pick(rng, []string{">", "<", "=="}))
		},
		func() string {
			p := "resource." + obj + ".metadata.generation"
			return fmt.Sprintf("(%s && -%s < 0)", guard(p), p)
		},
		// Extension constructors and methods on good and bad strings.
		func() string {
			p := "resource.object.metadata.annotations"
			return fmt.Sprintf(`(%s && %s.hasTag("ip") && ip(%s.getTag("ip")).%s)`, guard(p), p, p, pick(rng, []string{"isLoopback()", "isIpv4()", `isInRange(ip("10.0.0.0/8"))`}))
		},
		func() string {
			p := "resource.object.metadata.annotations"
			return fmt.Sprintf(`(%s && %s.hasTag("cost") && decimal(%s.getTag("cost")).%s(decimal("1.5")))`, guard(p), p, p, pick(rng, []string{"lessThan", "greaterThanOrEqual"}))
		},
		func() string {
			p := "resource.object.metadata.annotations"
			return fmt.Sprintf(`(%s && %s.hasTag("expires") && datetime(%s.getTag("expires")) %s datetime("2026-01-01T00:00:00Z"))`, guard(p), p, p, pick(rng, []string{"<", ">="}))
		},
		func() string {
			p := "resource.object.metadata.annotations"
			return fmt.Sprintf(`(%s && %s.hasTag("ttl") && duration(%s.getTag("ttl")) > duration("1h"))`, guard(p), p, p)
		},
		func() string {
			p := "resource.object.metadata.creationTimestamp"
			return fmt.Sprintf(`(%s && %s.offset(duration("%s")) > datetime("2026-01-01T00:00:00Z"))`, guard(p), p, pick(rng, []string{"1h", "-100000000d", "100000000d"}))
		},
		// like, containsAll, containsAny.
		func() string {
			p := "resource." + obj + ".metadata.name"
			return fmt.Sprintf(`(%s && %s like %q)`, guard(p), p, pick(rng, []string{"web-*", "*-1", "db*"}))
		},
		func() string {
			p := "resource.object.metadata.finalizers"
			return fmt.Sprintf(`(%s && %s.%s(["a/x", "c/z"]))`, guard(p), p, pick(rng, []string{"containsAll", "containsAny"}))
		},
		// getTag guarded and unguarded (an unguarded one fails on a missing tag).
		func() string {
			p := "resource.object.metadata.labels"
			return fmt.Sprintf(`(%s && %s.getTag("env") == %q)`, guard(p), p, pick(rng, []string{"prod", "dev"}))
		},
		func() string {
			p := "resource.object.metadata.labels"
			return fmt.Sprintf(`(%s && %s.hasTag("env") && %s.getTag("env") == %q)`, guard(p), p, p, pick(rng, []string{"prod", "dev"}))
		},
		func() string { return fmt.Sprintf(`principal.username == %q`, pick(rng, []string{"alice", "bob"})) },
		func() string { return `principal in k8s::Group::"dev"` },
		func() string { return fmt.Sprintf(`resource.name like %q`, pick(rng, []string{"web-*", "*-1"})) },
		func() string { return `resource has oldObject` },
	}
	// The error-prone atoms (the first ten) come up three times as often.
	weighted := append(append(append([]func() string{}, atoms...), atoms[:10]...), atoms[:10]...)
	var b strings.Builder
	for i := 0; i < n; i++ {
		effect := "permit"
		if rng.Intn(10) < 4 {
			effect = "forbid"
		}
		action := pick(rng, []string{"action", `action == k8s::Action::"create"`, `action in [k8s::Action::"update", k8s::Action::"patch"]`, `action in [k8s::Action::"delete", k8s::Action::"deletecollection"]`})
		resource := pick(rng, []string{"resource", "resource is core::pods"})
		fmt.Fprintf(&b, "@id(\"e%d\")\n%s(principal, %s, %s)", i, effect, action, resource)
		// One to three clauses, each a conjunction or disjunction of atoms.
		for k := 1 + rng.Intn(3); k > 0; k-- {
			var conds []string
			for j := 1 + rng.Intn(2); j > 0; j-- {
				a := weighted[rng.Intn(len(weighted))]()
				if rng.Intn(6) == 0 {
					a = "!(" + a + ")"
				}
				conds = append(conds, a)
			}
			kw := "when"
			if rng.Intn(4) == 0 {
				kw = "unless"
			}
			fmt.Fprintf(&b, " %s { %s }", kw, strings.Join(conds, pick(rng, []string{" && ", " || "})))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

func pickInt(rng *rand.Rand, xs []int64) int64 { return xs[rng.Intn(len(xs))] }

// addErrorProneFields gives the case's objects generations near the limits
// and annotations with good and bad extension literals.
func addErrorProneFields(rng *rand.Rand, c admissionCase) {
	edit := func(raw []byte) []byte {
		if raw == nil {
			return nil
		}
		obj, err := decodeObject(raw)
		if err != nil || obj == nil {
			return raw
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			return raw
		}
		if rng.Intn(4) > 0 {
			md["generation"] = pick(rng, []any{1, 2, "9223372036854775807", "-9223372036854775808", 4611686018427387904})
			if s, ok := md["generation"].(string); ok {
				md["generation"] = jsonNumber(s)
			}
		}
		if rng.Intn(4) > 0 {
			ann := map[string]any{}
			for _, kv := range [][2][]string{
				{{"ip"}, {"127.0.0.1", "10.1.2.3", "::1", "not-an-ip"}},
				{{"cost"}, {"1.2", "2.0", "x.y", "1.23456"}},
				{{"expires"}, {"2025-06-01T00:00:00Z", "2027-01-01", "yesterday"}},
				{{"ttl"}, {"2h", "30m", "forever"}},
			} {
				if rng.Intn(3) > 0 {
					ann[kv[0][0]] = pick(rng, kv[1])
				}
			}
			md["annotations"] = ann
		}
		if rng.Intn(3) == 0 {
			md["creationTimestamp"] = pick(rng, []string{"2025-11-21T10:00:00Z", "2026-06-01T00:00:00Z"})
		}
		if rng.Intn(3) == 0 {
			md["finalizers"] = []any{pick(rng, []string{"a/x", "c/z"})}
		}
		return mustJSON(obj)
	}
	c.data.Object = edit(c.data.Object)
	c.data.OldObject = edit(c.data.OldObject)
}
