package accessmatrix

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// A condition that starts by restricting the namespace splits into the
// namespaces and the rest; anything else stays a condition.
func TestNamespaceScope(t *testing.T) {
	for _, tc := range []struct {
		cond, scope, rest string
		ok                bool
	}{
		{`resource.namespace == "dev"`, "dev", "", true},
		{`"dev" == resource.namespace`, "dev", "", true},
		{`resource.namespace like "team-a-*"`, "team-a-*", "", true},
		{`["prod", "dev"].contains(resource.namespace)`, "dev, prod", "", true},
		{`resource.namespace == "a" || resource.namespace like "b*"`, "a, b*", "", true},
		{`resource.namespace == "dev" && resource.name == "web"`, "dev", `resource.name == "web"`, true},
		{`resource.namespace == "dev" && resource.name == "web" && principal.hasTag("x")`, "dev", `resource.name == "web" && principal.hasTag("x")`, true},
		// Only a first conjunct moves: one after another may never be
		// reached, or the other may fail everywhere.
		{`principal.hasTag("x") && resource.namespace == "dev"`, "", `principal.hasTag("x") && resource.namespace == "dev"`, false},
		{`resource.namespace == "dev" || resource.name == "x"`, "", `resource.namespace == "dev" || resource.name == "x"`, false},
		{`resource.namespace != "dev"`, "", `resource.namespace != "dev"`, false},
		{`resource.name == "dev"`, "", `resource.name == "dev"`, false},
		{`principal.namespace == "dev"`, "", `principal.namespace == "dev"`, false},
	} {
		scope, rest, ok := namespaceScope(tc.cond)
		if scope != tc.scope || ok != tc.ok || rest != tc.rest {
			t.Errorf("%s: scope %q rest %q ok %v, want %q %q %v", tc.cond, scope, rest, ok, tc.scope, tc.rest, tc.ok)
		}
		if !ok && rest != tc.cond {
			t.Errorf("%s: not split, yet the rest is %q", tc.cond, rest)
		}
	}
}

// scopePolicies: RoleBinding-like grants (alice reads pods in dev, bob in
// every team namespace), a cluster-wide grant (carol), a forbid for
// everyone in prod, exec for ops, and logs for alice in dev.
const scopePolicies = `
@id("alice-dev") permit (principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods) when { resource.namespace == "dev" };
@id("bob-teams") permit (principal == k8s::User::"bob", action == k8s::Action::"get", resource is core::pods) when { resource.namespace like "team-*" && resource.name like "web*" };
@id("carol-all") permit (principal == k8s::User::"carol", action == k8s::Action::"get", resource is core::pods);
@id("no-prod") forbid (principal, action, resource is core::pods) when { resource.namespace == "prod" };
@id("ops-exec") permit (principal in k8s::Group::"ops", action in [k8s::Action::"get", k8s::Action::"create"], resource is core::pods_exec);
@id("alice-logs") permit (principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods_log) when { resource.namespace == "dev" };
`

// Scopes overlap when a name of one matches a name or pattern of the other.
func TestScopesOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"", "dev", true}, {"dev", "dev", true}, {"dev", "prod", false}, {"dev, prod", "prod", true},
		{"team-*", "prod", false}, {"team-*", "team-a", true}, {"*-prod", "team-a-prod", true}, {"a*", "b*", true},
		{`st\*r`, "star", false}, {`st\*r`, "st*r", true},
	} {
		if got := mayOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("%q and %q overlap: %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := mayOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("%q and %q overlap: %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

// In the cluster's matrix a namespace restriction is the row's scope, not a
// condition: alice is allowed (✔) in dev, bob under a condition in team-*;
// the forbid in prod is every principal's row scoped to prod, and reaches
// the rows of every namespace as a forbid under a condition (!); the
// subresources the policies name (pods/exec, pods/log) are drawn, the
// others not.
func TestClusterMatrixShowsNamespacesAsScope(t *testing.T) {
	s := embeddedschema.Schema(t)
	ps, err := cedarlang.ParsePolicies("scope.cedar", []byte(scopePolicies))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	az := engine.NewEngine(s, set, engine.EngineOptions{})
	m, err := Build(context.Background(), az, s, Query{Subresources: NamedSubresources(s, ps, false), Verbs: []string{"get", "list", "create"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.Resources, " ") != "pods pods/exec pods/log" {
		t.Errorf("resources %q, want pods and the subresources the policies name", m.Resources)
	}
	want := map[[3]string]string{ // subject, namespaces, resource+verb: mark
		{"alice", "dev", "pods get"}: "✔", {"alice", "dev", "pods list"}: "✔", {"alice", "dev", "pods/log get"}: "✔",
		{"bob", "team-*", "pods get"}: "~", {"carol", "", "pods get"}: "✔!", {"*", "prod", "pods get"}: "✖",
		{"ops", "", "pods/exec create"}: "✔", {"ops", "", "pods/exec get"}: "✔",
	}
	for _, row := range m.Rows {
		for _, c := range row.Cells {
			k := [3]string{row.Label, row.Namespaces, c.Resource + " " + c.Verb}
			if mark, ok := want[k]; ok {
				if got := Mark(c); got != mark {
					t.Errorf("%v: %q, want %q (%+v)", k, got, mark, c.Entries)
				}
				delete(want, k)
			}
		}
	}
	for k := range want {
		t.Errorf("no cell %v", k)
	}
	var text bytes.Buffer
	m.Chain = "kcedar alone"
	if err := Write(&text, m); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"chain: kcedar alone", "NAMESPACES", "alice    User  dev"} {
		if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), strings.Join(strings.Fields(line), " ")) {
			t.Errorf("the table lacks %q:\n%s", line, text.String())
		}
	}
}
