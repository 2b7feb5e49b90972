package cedarlang

import (
	"slices"
	"testing"
)

func TestReachOf(t *testing.T) {
	for _, tc := range []struct {
		src          string
		verbs, types []string // nil: every
	}{
		{`permit(principal, action == k8s::Action::"get", resource is core::pods);`, []string{"get"}, []string{"core::pods"}},
		{`permit(principal, action, resource) when { resource is core::pods || resource is core::secrets };`, nil, []string{"core::pods", "core::secrets"}},
		{`permit(principal, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods) when { context.verb == "get" };`, []string{"get"}, []string{"core::pods"}},
		// A forbid whose verb test follows a read that may fail (the name is
		// absent on a list): the read errors and the forbid denies every
		// verb, so the verb test does not bound it.
		{`forbid(principal, action, resource is core::pods) when { resource.name == "x" && context.verb == "delete" };`, nil, []string{"core::pods"}},
		{`forbid(principal, action, resource is core::pods) when { context.verb == "delete" };`, []string{"delete"}, []string{"core::pods"}},
	} {
		ps, err := ParsePolicies("t.cedar", []byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		r := ReachOf(ps[0])
		var types []string
		if r.Types != nil {
			types = []string{}
			for _, ty := range r.Types {
				types = append(types, string(ty))
			}
		}
		slices.Sort(types)
		if !slices.Equal(r.Verbs, tc.verbs) || (r.Verbs == nil) != (tc.verbs == nil) || !slices.Equal(types, tc.types) || (types == nil) != (tc.types == nil) {
			t.Errorf("%s: verbs %v types %v, want %v %v", tc.src, r.Verbs, types, tc.verbs, tc.types)
		}
	}
}
