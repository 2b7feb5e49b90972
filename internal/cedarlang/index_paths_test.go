package cedarlang

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

// Every predicate kind keys every path the index knows: over sets of
// forbids each narrowed by one predicate on one path (one constant per
// tenant, read behind its `has` guard), no request meets more than one
// policy left to its verbs and types (an equal verb is one: it picks the
// bucket), and a request of one tenant meets that tenant's policy and
// almost no other (a prefix of another tenant's value, a shared gram).
func TestIndexKeysEveryPathAndKind(t *testing.T) {
	paths := []struct {
		expr, guard string
		set         func(q *CandidateQuery, v string)
	}{
		{"principal.username", "", func(q *CandidateQuery, v string) { q.Principal = types.NewEntityUID("k8s::User", types.String(v)) }},
		{"principal.uid", "principal has uid", func(q *CandidateQuery, v string) { q.UID = known(v) }},
		{"principal.name", "principal has name", func(q *CandidateQuery, v string) { q.PrincipalName = known(v) }},
		{"principal.namespace", "principal has namespace", func(q *CandidateQuery, v string) { q.PrincipalNamespace = known(v) }},
		{"resource.namespace", "resource has namespace", func(q *CandidateQuery, v string) { q.Namespace = known(v) }},
		{"resource.name", "resource has name", func(q *CandidateQuery, v string) { q.Name = known(v) }},
		{"resource.apiGroup", "resource has apiGroup", func(q *CandidateQuery, v string) { q.APIGroup = known(v) }},
		{"resource.resource", "resource has resource", func(q *CandidateQuery, v string) { q.Resource = known(v) }},
		{"resource.subresource", "resource has subresource", func(q *CandidateQuery, v string) { q.Subresource = known(v) }},
		{"resource.path", "resource has path", func(q *CandidateQuery, v string) { q.Path = known(v) }},
		{"context.verb", "", func(q *CandidateQuery, v string) { q.Verb = v }},
	}
	kinds := map[string]string{
		"equal":       `P == "V"`,
		"set":         `["V", "V-other"].contains(P)`,
		"prefix":      `P like "V*"`,
		"suffix":      `P like "*V"`,
		"infix":       `P like "*V*"`,
		"both ends":   `P like "val-*V"`,
		"disjunction": `(P == "V-z" || P like "V*")`,
	}
	const tenants = 300
	for _, p := range paths {
		for kind, form := range kinds {
			var b strings.Builder
			for i := range tenants {
				cond := strings.NewReplacer("P", p.expr, "V", fmt.Sprintf("val-%d-x", i)).Replace(form)
				if p.guard != "" {
					cond = p.guard + " && " + cond
				}
				fmt.Fprintf(&b, "@id(\"t%d\") forbid (principal, action, resource) when { %s };\n", i, cond)
			}
			set, err := NewPolicySet(mustParse(t, "paths.cedar", b.String()))
			if err != nil {
				t.Fatal(err)
			}
			// (An equal verb picks the policy's bucket: one tenant's.)
			if r := Unnarrowed(set.Policies); r.Max > 1 {
				t.Errorf("%s %s: a request meets %d of %d unnarrowed policies, such as %s", p.expr, kind, r.Max, len(r.Policies), r.Policies[0].Text())
				continue
			}
			q := CandidateQuery{Principal: types.NewEntityUID("k8s::User", "nobody"), Verb: "get", ResourceType: "k8s::Resource"}
			p.set(&q, "val-137-x")
			got := policyIDs(set.Candidates(q))
			if !slices.Contains(got, "t137") || len(got) > 3 {
				t.Errorf("%s %s: a request of tenant 137 meets %v", p.expr, kind, got)
			}
		}
	}
}
