package conditions

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// Group conditions, as a property: answers of sets large enough that
// policies share forms (generated, with the constants and `like` patterns
// of a few small pools)
// decide in two phases as Cedar does with everything known, errors
// included, and groups are formed often enough for that to mean something.
func TestGroupedTwoPhaseEqualsOnePhase(t *testing.T) {
	rng := rand.New(rand.NewSource(2009))
	h := newEquivalenceHarness(t)
	sets, perSet := 300, 20
	if testing.Short() {
		sets = 60
	}
	conditional, grouped, patterned := 0, 0, 0
	for i := 0; i < sets; i++ {
		withErrors := i%2 == 1
		src := genFamilies(rng, withErrors)
		for j := 0; j < perSet; j++ {
			c := genAdmissionCase(rng)
			if withErrors {
				addErrorProneFields(rng, c)
			}
			kind, err := h.check(src, c)
			if err != nil {
				t.Fatalf("set %d case %d: %v\npolicies:\n%s", i, j, err, src)
			}
			if kind == "conditional" {
				conditional++
			}
			for _, cond := range conditionsOf(h.lastWire) {
				if cond.Type == GroupConditionType {
					grouped++
					if strings.Contains(cond.Condition, `p0: "" like `) {
						patterned++ // members of differing patterns
					}
					break
				}
			}
		}
	}
	t.Logf("%d cases, %d conditional, %d answers with a group condition, %d of them of `like` patterns", sets*perSet, conditional, grouped, patterned)
	if grouped < conditional/10 || patterned < grouped/20 {
		t.Errorf("only %d of %d conditional answers carry a group, %d of patterns: the generator does not exercise groups", grouped, conditional, patterned)
	}
}

// genFamilies is a few families of generated policies: each a generated
// policy (testgen.ObjectPolicies, or the error-prone ones) and copies of it
// whose constants are drawn again from the generator's pools, as policies
// written from one pattern are.
func genFamilies(rng *rand.Rand, errorProne bool) string {
	var b strings.Builder
	for f := 0; f < 1+rng.Intn(4); f++ {
		base := genObjectPolicies(rng, 1)
		if errorProne {
			base = genErrorPolicies(rng, 1)
		}
		for m := 0; m < 1+rng.Intn(8); m++ {
			text := familyConstant.ReplaceAllStringFunc(base, func(c string) string {
				switch {
				case familyPattern.MatchString(c):
					return `"` + pick(rng, familyPatterns) + `"`
				case strings.HasPrefix(c, `"`):
					return fmt.Sprintf("%q", pick(rng, familyStrings))
				}
				return pick(rng, familyNumbers)
			})
			b.WriteString(policyID.ReplaceAllString(text, fmt.Sprintf(`@id("f%d-%d")`, f, m)) + "\n")
		}
	}
	return b.String()
}

// The constants and `like` patterns of the generators' pools (patterns as
// Cedar writes them: "p0" is also what a group's form holds in place of a
// pattern, and `\*` a literal star), and the regular expressions that find
// them in a policy's text.
var (
	familyStrings  = []string{"n1", "n2", "prod", "dev", "team-a", "team-b", "alice", "bob", "a/x", "b/y"}
	familyNumbers  = []string{"9223372036854775807", "2", "-9223372036854775807", "4611686018427387904"}
	familyPatterns = []string{"web-*", "*-1", "web-1", "db-*", "*", "*b-*", "p0", "p1", `web\*`, "*-*-*"}
	policyID       = regexp.MustCompile(`@id\("[a-z]0"\)`)
	familyConstant = regexp.MustCompile(`"(n1|n2|prod|dev|team-a|team-b|alice|bob|a/x|b/y)"|"(web-\*|\*-1)"|-?\b(9223372036854775807|4611686018427387904|2)\b`)
	familyPattern  = regexp.MustCompile(`^"(web-\*|\*-1)"$`)
)

// labelPolicies is n permits of one form, each allowing creates of pods
// labelled with its own team: "team-<i>" padded to width characters.
func labelPolicies(n, width int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		team := fmt.Sprintf("team-%0*d", width-5, i)
		fmt.Fprintf(&b, `@id("team-%d")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team") && resource.object.metadata.labels.getTag("team") == %q };
`, i, team)
	}
	return b.String()
}

func podWithTeam(team string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"team":%q}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, team))
}

// A create that 100 policies of one form would allow carries one condition
// of them all, far smaller than 100 conditions, and the callback names the
// policy whose constant the object meets.
func TestOneFormIsOneCondition(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, labelPolicies(100, 12)), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	d := e.Authorize(context.Background(), req)
	dec := e.Encode(d, RequestBinding(req))
	if err := wire.Validate(&dec); err != nil {
		t.Fatal(err)
	}
	conds := conditionsOf(dec)
	if len(conds) != 1 || conds[0].Type != GroupConditionType {
		t.Fatalf("want one group condition, got %d: %+v", len(conds), conds)
	}
	raw, _ := json.Marshal(dec)
	alone := 0 // the bytes of the policies' own conditions
	s := newSigner(e.codec.Keys.signing(), RequestBinding(req))
	for _, r := range d.AllowConditions() {
		cond, err := e.encodeResidual(r, engine.DecisionAllow, s)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(cond)
		alone += len(b)
	}
	t.Logf("100 policies of one form: one condition of %d bytes, %d bytes of answer; as 100 conditions, %d bytes", len(conds[0].Condition), len(raw), alone)
	if len(raw)*4 > alone {
		t.Errorf("the answer is %d bytes, more than a quarter of the %d its policies' own conditions take", len(raw), alone)
	}
	data := admissionData(req)
	data.Operation = "CREATE"
	data.Object = podWithTeam("team-0000057")
	v := e.EvaluateConditions(context.Background(), &dec, data)
	if v.Type() != engine.DecisionAllow || !strings.Contains(v.Reason(), "policy team-57") || strings.Contains(v.Reason(), "team-58") {
		t.Errorf("team-57's pod: %v (%s), want Allow by policy team-57", v.Type(), v.Reason())
	}
	data.Object = podWithTeam("team-x")
	if v := e.EvaluateConditions(context.Background(), &dec, data); v.Type() != engine.DecisionNoOpinion {
		t.Errorf("an unknown team's pod: %v (%s), want NoOpinion", v.Type(), v.Reason())
	}
}

// A create that 100 policies differing only in a name pattern would allow
// carries one condition of them all, each member its own pattern, and the
// callback names the policy whose pattern the object's name meets.
func TestPatternFormIsOneCondition(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, `@id("web-%d")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has name && resource.name like "web-t%d-*" };
`, i, i)
	}
	e := newEngine(schematest.Schema(), policytest.Set(t, b.String()), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	dec := e.Encode(e.Authorize(context.Background(), req), RequestBinding(req))
	if err := wire.Validate(&dec); err != nil {
		t.Fatal(err)
	}
	if conds := conditionsOf(dec); len(conds) != 1 || conds[0].Type != GroupConditionType {
		t.Fatalf("want one group condition, got %d: %+v", len(conds), conds)
	}
	data := admissionData(req)
	data.Operation = "CREATE"
	for name, want := range map[string]string{"web-t57-abc": "policy web-57", "web-t5-x": "policy web-5", "web-t571": "", "p0": ""} {
		data.Name = name
		v := e.EvaluateConditions(context.Background(), &dec, data)
		switch {
		case want == "" && v.Type() != engine.DecisionNoOpinion:
			t.Errorf("pod %s: %v (%s), want NoOpinion", name, v.Type(), v.Reason())
		case want != "" && (v.Type() != engine.DecisionAllow || !strings.HasSuffix(v.Reason(), want)):
			t.Errorf("pod %s: %v (%s), want Allow by %s", name, v.Type(), v.Reason(), want)
		}
	}
}

// A group too large for one condition is cut into several, each within
// upstream's limits, and together they decide as the policies do.
func TestLargeGroupIsCut(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, labelPolicies(120, 400)), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	dec := e.Encode(e.Authorize(context.Background(), req), RequestBinding(req))
	if err := wire.Validate(&dec); err != nil {
		t.Fatal(err)
	}
	conds := conditionsOf(dec)
	if len(conds) < 5 || len(conds) > 10 {
		t.Fatalf("want 120 members of ~420 bytes cut into 5 to 10 conditions, got %d", len(conds))
	}
	data := admissionData(req)
	data.Operation = "CREATE"
	for _, i := range []int{0, 23, 24, 119} {
		data.Object = podWithTeam(fmt.Sprintf("team-%0395d", i))
		v := e.EvaluateConditions(context.Background(), &dec, data)
		if v.Type() != engine.DecisionAllow || !strings.Contains(v.Reason(), fmt.Sprintf("policy team-%d", i)) {
			t.Errorf("team %d: %v (%s), want Allow by its policy", i, v.Type(), v.Reason())
		}
	}
}

// A member's constant edited in transit breaks the group's MAC.
func TestEditedGroupIsRefused(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, labelPolicies(3, 12)), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	dec := e.Encode(e.Authorize(context.Background(), req), RequestBinding(req))
	conds := conditionsOf(dec)
	if len(conds) != 1 || conds[0].Type != GroupConditionType {
		t.Fatalf("want one group condition, got %+v", conds)
	}
	dec.ConditionsMap.AllowConditions[0].Condition = strings.Replace(conds[0].Condition, "team-0000001", "team-evilevil", 1)
	data := admissionData(req)
	data.Operation, data.Object = "CREATE", podWithTeam("team-evilevil")
	v := e.EvaluateConditions(context.Background(), &dec, data)
	if v.Type() == engine.DecisionAllow || !strings.Contains(v.EvaluationError(), "altered") {
		t.Errorf("an edited group: %v (%s; %s), want refused as altered", v.Type(), v.Reason(), v.EvaluationError())
	}
}

// The offline report lists a group's policies one by one, as their own
// conditions, each evaluated.
func TestReportExpandsGroups(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, labelPolicies(3, 12)), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	rep := e.Report(context.Background(), req, &Admission{Operation: "CREATE", Object: podWithTeam("team-0000002")})
	if len(rep.Conditions) != 3 {
		t.Fatalf("want 3 conditions, got %+v", rep.Conditions)
	}
	for i, c := range rep.Conditions {
		want := i == 2
		if c.ID != ConditionID(fmt.Sprintf("team-%d", i)) || c.Holds == nil || *c.Holds != want || !strings.Contains(c.Expression, fmt.Sprintf(`"team-%07d"`, i)) {
			t.Errorf("condition %d: %+v, want policy team-%d's, holds %v", i, c, i, want)
		}
	}
	if rep.Outcome != "Allow" {
		t.Errorf("outcome %s (%s), want Allow", rep.Outcome, rep.OutcomeReason)
	}
}

// Readable shows a group as its policies' expressions, for can-i and
// people, without a key.
func TestReadableGroup(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, labelPolicies(3, 12)), engine.EngineOptions{})
	req := policytest.ResourceRequest("alice", nil, "create", "", "pods", "", "ns", "")
	conds := conditionsOf(e.Encode(e.Authorize(context.Background(), req), RequestBinding(req)))
	if len(conds) != 1 {
		t.Fatalf("want one group condition, got %+v", conds)
	}
	text := Readable(conds[0])
	if strings.Count(text, " || ") != 2 || strings.Contains(text, "context") {
		t.Errorf("Readable = %s; want three expressions joined by ||, with the constants in place", text)
	}
	for i := 0; i < 3; i++ {
		if !strings.Contains(text, fmt.Sprintf(`"team-%07d"`, i)) {
			t.Errorf("Readable = %s; want team-%07d", text, i)
		}
	}
}
