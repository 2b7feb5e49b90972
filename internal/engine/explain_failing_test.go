package engine

import (
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// The sub-expression why names is the one that failed. Over random policy
// sets (type tests, namespace, name, user, group and extra conditions,
// clauses that fail to evaluate, && || ! nested, `is ... in` scopes) and
// requests (reads fully known, writes whose object is unknown): for every
// part of every traced policy that names a failing sub-expression, that
// sub-expression, parsed back from its text and evaluated alone for the
// request, has the result the part says and is false (a when clause or a
// scope) or true (an unless clause) or an error; it sits in the part
// where Cedar's left-to-right evaluation reaches it and stops, every
// conjunct before it on the way true and every disjunct before it false;
// and the values shown for it are only those it reads. 3,000 requests (600
// with -short or -race).
func TestExplainNamesTheFailingSubExpression(t *testing.T) {
	sets := 300
	if testing.Short() || raceEnabled {
		sets = 60
	}
	s := embeddedschema.Schema(t)
	rng := rand.New(rand.NewSource(41))
	stats := map[string]int{}
	for i := 0; i < sets; i++ {
		src := testgen.RandomPolicies(rng, 2+rng.Intn(6), failingScope, func(rng *rand.Rand) string { return testgen.RandomTree(rng, 3, failingLeaf) })
		az := NewEngine(s, policytest.Set(t, src), EngineOptions{})
		for j := 0; j < 10; j++ {
			req := explainRequest(rng)
			if rng.Intn(3) == 0 {
				req.Verb, req.Name = "create", ""
			}
			ex, err := explain(az, req)
			if err != nil {
				t.Fatalf("%s: %v", req, err)
			}
			env := envOf(az, req)
			for _, tr := range slices.Concat(ex.Deciding, ex.NearMisses) {
				for _, part := range tr.Parts {
					if msg := checkFailing(env, tr, part, stats); msg != "" {
						t.Fatalf("%s: policy %s, part %s: %s\npolicies:\n%s\n%s", req, tr.ID, part.Text, msg, src, ex)
					}
				}
			}
		}
	}
	t.Logf("%d requests: %v", sets*10, stats)
	for _, k := range []string{"when", "unless", "principal", "nested", "type test", "error", "not pinned"} {
		if stats[k] < sets/10 {
			t.Errorf("only %d %q: the generator is too weak", stats[k], k)
		}
	}
}

// checkFailing checks a part's failing sub-expression ("" when right).
func checkFailing(env eval.Env, tr PolicyTrace, part TracePart, stats map[string]int) string {
	f := part.Failing
	if f == nil {
		if !part.lets() && part.Result != "unknown" {
			stats["not pinned"]++
		}
		return ""
	}
	if part.lets() || part.Result == "unknown" {
		return "a part that lets the policy apply names a failing sub-expression"
	}
	stops := "false"
	if part.Kind == "unless" {
		stops = "true"
	}
	sub, err := ParseExpr(f.Text)
	if err != nil {
		return "the sub-expression does not parse: " + err.Error()
	}
	got := evaluatePart(env, ast.Permit().When(ast.NewNode(sub))).Result
	if got != f.Result || got != stops && got != "error" {
		return "the sub-expression evaluates to " + got + ", named " + f.Result + ", and the part stops on " + stops
	}
	root, err := partExpr(tr, part)
	if err != nil {
		return err.Error()
	}
	depth, ok := reaches(env, root, f.Text, 0)
	if !ok {
		return "Cedar's evaluation of the part does not stop at " + f.Text
	}
	for _, v := range f.Values {
		path, _, _ := strings.Cut(v, " is ")
		path = strings.TrimSuffix(path, "'s type")
		if !strings.Contains(f.Text, path) {
			return "a value shown is not read by the sub-expression: " + v
		}
	}
	stats[part.Kind]++
	if depth > 1 {
		stats["nested"]++
	}
	if strings.Contains(f.Text, " is ") {
		stats["type test"]++
	}
	if f.Result == "error" {
		stats["error"]++
	}
	return ""
}

// partExpr is the expression of a traced part, parsed back from its text:
// a clause's body, or an `is T in E` scope constraint as `v is T && v in E`.
func partExpr(tr PolicyTrace, part TracePart) (ast.IsNode, error) {
	text := part.Text
	switch part.Kind {
	case "when", "unless":
		text = strings.TrimSuffix(strings.TrimPrefix(text, part.Kind+" { "), " }")
	default:
		m := isInScope.FindStringSubmatch(text)
		if m == nil {
			return nil, errNotIsIn
		}
		text = m[1] + " is " + m[2] + " && " + m[1] + " in " + m[3]
	}
	return ParseExpr(text)
}

var (
	isInScope  = regexp.MustCompile(`^(principal|resource) is (\S+) in (.+)$`)
	errNotIsIn = errorf("a scope constraint that is not `is ... in` names a failing sub-expression")
)

// reaches reports whether Cedar, evaluating n left to right, stops at the
// sub-expression text: n is it, or n is a conjunction (disjunction) whose
// operands before the one that reaches it are true (false). depth counts
// the levels gone down.
func reaches(env eval.Env, n ast.IsNode, text string, depth int) (int, bool) {
	if t, err := ExprText(n); err == nil && t == text && depth > 0 {
		return depth, true
	}
	passes := ""
	var operands []ast.IsNode
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		passes, operands = "true", []ast.IsNode{v.Left, v.Right}
	case ast.NodeTypeOr:
		passes, operands = "false", []ast.IsNode{v.Left, v.Right}
	default:
		return 0, false
	}
	for _, o := range operands {
		if d, ok := reaches(env, o, text, depth+1); ok {
			return d, true
		}
		if evaluatePart(env, ast.Permit().When(ast.NewNode(o))).Result != passes {
			return 0, false
		}
	}
	return 0, false
}

// envOf is the environment Explain evaluates req's parts in.
func envOf(e *Engine, req *entities.Request) eval.Env {
	verb := entities.Verbs(e.schema, req)[0]
	target := entities.ResolveTarget(e.schema, req)
	return e.explainEnv(req, verb, target, target.Open(req), AdmissionShapes(target, req, verb))
}

func failingScope(rng *rand.Rand) string {
	principal := []string{"principal", `principal in k8s::Group::"dev"`, `principal is k8s::User in k8s::Group::"dev"`,
		`principal is k8s::ServiceAccount in k8s::Group::"system:serviceaccounts"`, "principal is k8s::User"}[rng.Intn(5)]
	action := []string{"action", `action in [k8s::Action::"list", k8s::Action::"get", k8s::Action::"create"]`}[rng.Intn(2)]
	return principal + ", " + action + ", resource"
}

func failingLeaf(rng *rand.Rand) string {
	leaves := []string{
		"resource is core::pods", "resource is core::secrets", "principal is k8s::User", "principal is k8s::ServiceAccount",
		`resource.namespace == "dev"`, `resource.name like "web*"`, `principal.username == "alice"`,
		`principal.groups.contains("ops")`, `principal.namespace == "dev"`, // fails for users
		`principal.hasTag("team") && principal.getTag("team").contains("a")`, `principal.getTag("team").contains("a")`, // fails without the tag
		`resource has object && resource.object.metadata has labels`, "true", "false",
	}
	return leaves[rng.Intn(len(leaves))]
}

// A clause that fails on the resource's type blames the type test, not the
// namespace it also reads; a Deny of a read names every forbid that holds,
// in its policies as in the deciding ones.
func TestExplainBlamesTheTypeAndNamesEveryForbid(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps := policytest.Set(t, `@id("f1") forbid (principal, action == k8s::Action::"get", resource is core::pods);
@id("f2") forbid (principal, action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "dev" };
@id("p1") permit (principal, action, resource) when { resource is core::secrets && resource.namespace == "dev" };
`)
	az := NewEngine(s, ps, EngineOptions{})
	alice := entities.UserInfo{Name: "alice", Groups: []string{"dev"}}
	for _, name := range []string{"web", ""} {
		ex, err := explain(az, &entities.Request{User: alice, ResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "pods", Namespace: "dev", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		text := ex.String()
		want := "`when { resource is core::secrets && resource.namespace == \"dev\" }` was false: `resource is core::secrets` is false (resource's type is core::pods)"
		if !strings.Contains(text, want) || strings.Contains(text, "was false: resource.namespace") {
			t.Errorf("name %q: missing %q in:\n%s", name, want, text)
		}
		if !slices.Equal(ex.Policies, []string{"f1", "f2"}) || !slices.Equal(ex.DecidingIDs(), []string{"f1", "f2"}) {
			t.Errorf("name %q: policies %q, deciding %q, want f1 and f2", name, ex.Policies, ex.DecidingIDs())
		}
	}
}
