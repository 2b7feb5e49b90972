package cedarlang

import (
	"slices"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

// The tag and suffix keys: what each shape needs of a request, and forbids
// that may fail (an unguarded getTag or labels read) stay candidates.
func TestIndexTagsAndSuffixes(t *testing.T) {
	set, err := NewPolicySet(mustParse(t, "tags.cedar", `
@id("extra") permit(principal, action == k8s::Action::"get", resource is core::pods) when { principal.getTag("dept").contains("a") };
@id("extra-guarded-forbid") forbid(principal, action == k8s::Action::"get", resource is core::pods) when { principal.hasTag("dept") && principal.getTag("dept").contains("b") };
@id("extra-unguarded-forbid") forbid(principal, action == k8s::Action::"get", resource is core::pods) when { principal.getTag("dept").contains("c") };
@id("label") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource has namespaceObject && resource.namespaceObject.metadata has labels && resource.namespaceObject.metadata.labels.hasTag("team") && resource.namespaceObject.metadata.labels.getTag("team") == "x" };
@id("label-unguarded-forbid") forbid(principal, action == k8s::Action::"get", resource is core::pods) when { resource.namespaceObject.metadata.labels.getTag("team") == "y" };
@id("suffix") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "*-prod" };
@id("inner") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "db-*-main" };
@id("star") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name like "*\*" };
`))
	if err != nil {
		t.Fatal(err)
	}
	query := func(name string, extra map[string][]string, labels QueryLabels) CandidateQuery {
		return CandidateQuery{Principal: types.NewEntityUID("k8s::User", "u"), Verb: "get", ResourceType: "core::pods",
			Namespace: known("ns"), Name: known(name), APIGroup: known(""), Resource: known("pods"), Extra: extra, NamespaceLabels: labels}
	}
	knownLabels := func(l map[string]string) QueryLabels { return QueryLabels{State: LabelsKnown, Labels: l} }
	unguarded := []string{"extra-unguarded-forbid", "label-unguarded-forbid"}
	for _, c := range []struct {
		q    CandidateQuery
		want []string
	}{
		{query("web", nil, knownLabels(nil)), nil},
		{query("web", map[string][]string{"dept": {"a"}}, knownLabels(nil)), []string{"extra"}},
		{query("web", map[string][]string{"dept": {"b", "z"}}, knownLabels(nil)), []string{"extra-guarded-forbid"}},
		{query("web", nil, knownLabels(map[string]string{"team": "x"})), []string{"label"}},
		{query("web", nil, QueryLabels{}), []string{"label"}}, // unknown labels: open
		{query("api-prod", nil, knownLabels(nil)), []string{"suffix"}},
		{query("-prod", nil, knownLabels(nil)), []string{"suffix"}},
		{query("db-1-main", nil, knownLabels(nil)), []string{"inner"}},
		{query("db-main", nil, knownLabels(nil)), []string{"inner"}}, // a candidate; evaluation says no
		{query("a*", nil, knownLabels(nil)), []string{"star"}},
		{query("prod", nil, knownLabels(nil)), nil},
	} {
		want := append(slices.Clone(c.want), unguarded...)
		got := policyIDs(set.Candidates(c.q))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("name %q extra %v labels %v: candidates %v, want %v", c.q.Name.Value, c.q.Extra, c.q.NamespaceLabels, got, want)
		}
	}
}
