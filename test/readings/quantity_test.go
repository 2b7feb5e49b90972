// Package readings tests kcedar's typed readings of object values
// end to end through the engine: a SubjectAccessReview that leaves
// conditions, and the callback that evaluates them against the object.
package readings

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// milliOracle is q in milli-units when that is exact and fits an int64:
// q's exact decimal value as a rational, times 1000. A value it finds is
// checked with Quantity.Cmp (Quantity.MilliValue is not used: it is wrong
// for some negative binary-suffixed values, e.g. -.94Ti).
func milliOracle(t testing.TB, q resource.Quantity) (int64, bool) {
	r, ok := new(big.Rat).SetString(q.AsDec().String())
	if !ok {
		t.Fatalf("quantity %s: %s is not a decimal", q.String(), q.AsDec())
	}
	r.Mul(r, big.NewRat(1000, 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	m := r.Num().Int64()
	if resource.NewMilliQuantity(m, resource.DecimalSI).Cmp(q) != 0 {
		t.Fatalf("quantity %s: %dm does not compare equal", q.String(), m)
	}
	return m, true
}

var suffixes = []string{"n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// genQuantity draws a quantity string of every form the parser knows:
// signs, integers, fractions (".5", "5.", "1.25"), every suffix, exponents
// ("1e3", "12E-3"), values near the edges of the reading (around 9.2e15
// units and 1m), and strings that are not quantities.
func genQuantity(rng *rand.Rand) string {
	switch rng.Intn(12) {
	case 0:
		bad := []string{"", "abc", "1.5.5", "1Ki5", "--1", " 1", "1 Gi", "0x10", "1e", "Gi", "1iB", "١"}
		return bad[rng.Intn(len(bad))]
	case 1: // near the top of the range, in units
		return fmt.Sprintf("%d", int64(9223372036854775)+int64(rng.Intn(5))-2)
	case 2: // near the top, with a binary suffix
		return fmt.Sprintf("%d%s", int64(8191)+int64(rng.Intn(3)), []string{"Ti", "Pi"}[rng.Intn(2)]) + ""
	}
	var b strings.Builder
	switch rng.Intn(4) {
	case 0:
		b.WriteString("-")
	case 1:
		b.WriteString("+")
	}
	digits := func(n int) string {
		var d strings.Builder
		for i := 0; i < n; i++ {
			d.WriteByte(byte('0' + rng.Intn(10)))
		}
		return d.String()
	}
	switch rng.Intn(4) {
	case 0:
		b.WriteString(digits(1 + rng.Intn(4)))
	case 1:
		b.WriteString(digits(1+rng.Intn(3)) + "." + digits(1+rng.Intn(4)))
	case 2:
		b.WriteString("." + digits(1+rng.Intn(3)))
	default:
		b.WriteString(digits(1+rng.Intn(2)) + ".")
	}
	if rng.Intn(5) == 0 {
		e := []string{"e", "E"}[rng.Intn(2)]
		sign := []string{"", "+", "-"}[rng.Intn(3)]
		b.WriteString(e + sign + fmt.Sprint(rng.Intn(19)))
	} else {
		b.WriteString(suffixes[rng.Intn(len(suffixes))])
	}
	return b.String()
}

// comparison is a Cedar comparison of the reading with a threshold and the
// same comparison of Quantity.Cmp's result with zero.
type comparison struct {
	op    string
	holds func(cmp int) bool
}

var comparisons = []comparison{
	{"<", func(c int) bool { return c < 0 }},
	{"<=", func(c int) bool { return c <= 0 }},
	{"==", func(c int) bool { return c == 0 }},
	{">=", func(c int) bool { return c >= 0 }},
	{">", func(c int) bool { return c > 0 }},
}

// field is where the quantity sits: a map of quantities (a PVC's storage
// request) or a scalar (a CSIStorageCapacity's capacity).
type field struct {
	resource, group, reading string
	object                   func(value any) map[string]any
}

var fields = []field{
	{
		resource: "persistentvolumeclaims", group: "",
		reading: `resource.object.v1.spec has resources && resource.object.v1.spec.resources has requestsQuantity &&
    resource.object.v1.spec.resources.requestsQuantity.hasTag("storage") &&
    resource.object.v1.spec.resources.requestsQuantity.getTag("storage")`,
		object: func(v any) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "c", "namespace": "ns"},
				"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": v}}}}
		},
	},
	{
		resource: "csistoragecapacities", group: "storage.k8s.io",
		reading: `resource.object.v1 has capacityQuantity && resource.object.v1.capacityQuantity`,
		object: func(v any) map[string]any {
			return map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": map[string]any{"name": "c", "namespace": "ns"},
				"storageClassName": "standard", "capacity": v}
		},
	},
}

// policies are a permit that grants when the reading compares as op with
// threshold, and a forbid in the documented fail-closed idiom beside a
// permit of everything.
func policies(f field, op string, threshold int64) (permit, forbid string) {
	scope := fmt.Sprintf(`(principal, action == k8s::Action::"create", resource is %s)`, schemagen.ResourceEntityType(f.group, f.resource, ""))
	cond := fmt.Sprintf(`resource has object && resource.object has v1 && %s has milli && %s.milli %s %d`, f.reading, f.reading, op, threshold)
	permit = fmt.Sprintf("@id(\"grant\")\npermit %s when { %s };\n", scope, cond)
	forbid = fmt.Sprintf("@id(\"everyone\")\npermit %s;\n@id(\"limit\")\nforbid %s when { resource has object } unless { %s };\n", scope, scope, cond)
	return permit, forbid
}

func decider(t testing.TB, s *schemagen.Schema, src string) *offline.Decider {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("gen.cedar", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return offline.NewDecider(s, set)
}

// TestQuantityComparisonsMatchQuantityCmp draws quantities and thresholds
// and decides a create through the engine (the SubjectAccessReview leaves a
// condition; the callback evaluates it against the object). Where the
// value's milli reading is exact and fits, the outcome follows
// Quantity.Cmp; where it is not, the permit does not grant and the forbid
// denies (fail closed).
func TestQuantityComparisonsMatchQuantityCmp(t *testing.T) {
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(24))
	thresholds := []string{"0", "1m", "500m", "1", "4", "1Gi", "1.5G", "100Ti", "9223372036854775"}
	var cases, unrepresentable int
	for _, f := range fields {
		for _, ts := range thresholds {
			tq := resource.MustParse(ts)
			tm, ok := milliOracle(t, tq)
			if !ok {
				t.Fatalf("threshold %s is not representable", ts)
			}
			for _, c := range comparisons {
				permit, forbid := policies(f, c.op, tm)
				dp, df := decider(t, s, permit), decider(t, s, forbid)
				for i := 0; i < 40; i++ {
					qs := genQuantity(rng)
					q, perr := resource.ParseQuantity(qs)
					_, exact := milliOracle(t, q)
					holds := perr == nil && exact && c.holds(q.Cmp(tq))
					if perr != nil || !exact {
						unrepresentable++
					}
					for _, v := range wireForms(qs) {
						cases++
						checkOutcome(t, dp, f, v, holds, "Allow", "NoOpinion", fmt.Sprintf("permit %s %s", c.op, ts))
						checkOutcome(t, df, f, v, holds, "Allow", "Deny", fmt.Sprintf("forbid unless %s %s", c.op, ts))
					}
				}
			}
		}
	}
	t.Logf("%d decisions, %d draws not representable", cases, unrepresentable)
	if unrepresentable == 0 || unrepresentable == cases {
		t.Fatalf("the generator drew %d unrepresentable values of %d: both kinds are needed", unrepresentable, cases)
	}
}

// wireForms are the JSON forms of a quantity: always its string, and a
// JSON number too when it is one (quantities may be written as numbers).
func wireForms(qs string) []any {
	forms := []any{qs}
	var n json.Number
	if err := json.Unmarshal([]byte(qs), &n); err == nil && strings.TrimSpace(qs) == qs {
		forms = append(forms, n)
	}
	return forms
}

func checkOutcome(t *testing.T, d *offline.Decider, f field, value any, holds bool, yes, no, what string) {
	t.Helper()
	obj, err := json.Marshal(f.object(value))
	if err != nil {
		t.Fatal(err)
	}
	req := &entities.Request{User: entities.UserInfo{Name: "alice"}, Verb: "create", ResourceRequest: true, APIGroup: f.group, Resource: f.resource, Namespace: "ns"}
	rep := d.Decide(req, &conditions.Admission{Operation: "CREATE", Object: obj})
	want := no
	if holds {
		want = yes
	}
	if rep.Outcome != want {
		t.Errorf("%s, %s %#v: outcome %s (%s %s), want %s", what, f.resource, value, rep.Outcome, rep.OutcomeReason, rep.OutcomeError, want)
	}
}
