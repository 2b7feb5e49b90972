package lint

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// A has test no type of the scope can satisfy warns at its `has`, with a
// hint naming what exists; the fixed version is clean.
func TestHasNeverHolds(t *testing.T) {
	c := testChecker(t)
	cases := []struct {
		name, src, pos, msg, hint, fixed string
	}{
		{"object without its version", `@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has spec };`, "3:47",
			"`resource.object has spec` never holds: core::pods has no resource.object.spec",
			"did you mean resource.object.v1.spec? guard it: resource has object && resource.object has v1 && resource.object.v1 has spec",
			`@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec };`},
		{"object without its version, any resource type", `@id("w")
permit (principal, action == k8s::Action::"create", resource)
when { resource has object && resource.object has spec };`, "3:47",
			"resource types the scope allows has resource.object.spec", "did you mean resource.object.v1.spec?",
			`@id("w")
permit (principal, action == k8s::Action::"create", resource)
when { resource has object && resource.object has v1 && resource.object.v1 has spec };`},
		{"field on the resource", `@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has nodeName };`, "3:17", "core::pods has no resource.nodeName",
			"did you mean resource.object.v1.spec.nodeName?",
			`@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName };`},
		{"metadata under the version", `@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has metadata };`, "3:76",
			"resource.object.v1.metadata", "did you mean resource.object.metadata? metadata is not per version",
			`@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has metadata };`},
		{"field name typo", `@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       !(resource.object.v1.spec has nodeNme) };`, "4:34", "never holds", "did you mean resource.object.v1.spec.nodeName?",
			`@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       !(resource.object.v1.spec has nodeName) };`},
		{"label tested with has", `@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels has env };`, "3:102",
			"resource.object.metadata.labels.env", `tags: resource.object.metadata.labels.hasTag("env")`,
			`@id("w")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("env") };`},
		{"principal attribute typo", `@id("w")
permit (principal, action, resource is core::pods)
when { principal has usrname };`, "3:18", "k8s::Node, k8s::ServiceAccount, k8s::User have no principal.usrname",
			"did you mean principal.username?",
			`@id("w")
permit (principal, action, resource is core::pods)
when { principal has username };`},
		{"namespace of a user", `@id("w")
permit (principal is k8s::User, action, resource is core::pods)
when { principal has namespace };`, "3:18", "k8s::User has no principal.namespace", "",
			`@id("w")
permit (principal is k8s::ServiceAccount, action, resource is core::pods)
when { principal has namespace };`},
		{"context attribute", `@id("w")
permit (principal, action, resource is core::pods)
when { context has namespace };`, "3:16", "`context has namespace` never holds", "no context attributes",
			`@id("w")
permit (principal, action, resource is core::pods)
when { resource has namespace };`},
		{"the second test of an attribute", `@id("w")
permit (principal, action, resource is core::pods)
when { resource has name || resource has object && resource.object has name };`, "3:68", "resource.object.name", "did you mean resource.object.metadata.name?",
			`@id("w")
permit (principal, action, resource is core::pods)
when { resource has name || resource has object && resource.object.metadata has name };`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := c.Check([]File{{Name: "w.cedar", Data: []byte(tc.src)}})
			if res.Errors() != 0 || len(res.Diagnostics) != 1 {
				t.Fatalf("want one warning, got %v", res.Diagnostics)
			}
			d := res.Diagnostics[0]
			pos := fmt.Sprintf("%d:%d", d.Line, d.Column)
			if d.Severity != Warning || d.Code != CodeHasNeverHolds || pos != tc.pos || !strings.Contains(d.Message, tc.msg) || d.Hint == "" || !strings.Contains(d.Hint, tc.hint) {
				t.Errorf("got %s [%s %s] at %s, want [%s] at %s ~ %q, hint ~ %q", d, d.Severity, d.Code, pos, CodeHasNeverHolds, tc.pos, tc.msg, tc.hint)
			}
			if !strings.Contains(d.String(), ": policy w: warning: ") {
				t.Errorf("rendering: %s", d)
			}
			if fixed := c.Check([]File{{Name: "w.cedar", Data: []byte(tc.fixed)}}); len(fixed.Diagnostics) > 0 {
				t.Errorf("fixed version: %v", fixed.Diagnostics)
			}
		})
	}
}

// Tests that can hold draw no warning: optional attributes, attributes some
// type of the scope has, tags, tests guarded by is, and tests after one that
// already never holds (only the first is reported).
func TestHasNeverHoldsNoFalsePositives(t *testing.T) {
	c := testChecker(t)
	pods, any := "resource is core::pods", "resource"
	for i, tc := range []struct{ scope, cond string }{
		{pods, `resource has object && resource.object has v1`},
		{any, `resource has object && resource.object has v1`},
		{pods, `resource has oldObject && resource.oldObject has metadata && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("env")`},
		{pods, `resource has namespace && resource has name`},
		{any, `resource has namespace && resource has name`},
		{pods, `principal has namespace`}, // service accounts
		{pods, `principal is k8s::ServiceAccount && principal has namespace`},
		{pods, `principal has uid`},
		{any, `resource has subresource`}, // subresource types
		{any, `resource is core::pods && resource has object && resource.object has v1 && resource.object.v1 has spec`},
	} {
		src := fmt.Sprintf("@id(\"n%d\")\npermit (principal, action == k8s::Action::\"create\", %s)\nwhen { %s };", i, tc.scope, tc.cond)
		if res := c.Check([]File{{Name: "n.cedar", Data: []byte(src)}}); len(res.Diagnostics) > 0 {
			t.Errorf("%s\n=> %v", src, res.Diagnostics)
		}
	}
	// Only the first of a chain is reported: the rest is unreachable.
	src := `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has spec && resource.object.spec has nodeName };`
	if res := c.Check([]File{{Name: "c.cedar", Data: []byte(src)}}); len(res.Diagnostics) != 1 || res.Diagnostics[0].Column != 47 {
		t.Errorf("want one warning, at the first has: %v", res.Diagnostics)
	}
}

// For every resource type of the embedded schema, drawn from the schema:
// each real object path resource.object.<version>.spec draws no warning,
// and the path without the version warns with a hint naming a real one.
func TestHasNeverHoldsEveryResourceType(t *testing.T) {
	c := testChecker(t)
	var real, broken []File
	want := map[string][]string{} // policy id -> the real paths
	for _, r := range c.Schema.Resources {
		if !appliesToSome(c, r.EntityType) {
			continue
		}
		versions := versionsWithSpec(c, r.EntityType)
		if len(versions) == 0 {
			continue
		}
		id := strings.ReplaceAll(string(r.EntityType), "::", "-")
		for _, v := range versions {
			want[id] = append(want[id], "resource.object."+v+".spec")
			real = append(real, File{Name: id + "-" + v + ".cedar", Data: []byte(fmt.Sprintf(
				"@id(%q)\npermit (principal, action, resource is %s)\nwhen { resource has object && resource.object has %s && resource.object.%s has spec };",
				id+"-"+v, r.EntityType, v, v))})
		}
		broken = append(broken, File{Name: id + ".cedar", Data: []byte(fmt.Sprintf(
			"@id(%q)\npermit (principal, action, resource is %s)\nwhen { resource has object && resource.object has spec };", id, r.EntityType))})
	}
	if len(broken) < 20 {
		t.Fatalf("only %d resource types with an object spec", len(broken))
	}
	if res := c.Check(real); len(res.Diagnostics) > 0 {
		t.Errorf("real paths: %d diagnostics, first %s", len(res.Diagnostics), res.Diagnostics[0])
	}
	res := c.Check(broken)
	got := map[string]Diagnostic{}
	for _, d := range res.Diagnostics {
		if _, dup := got[d.Policy]; dup || d.Code != CodeHasNeverHolds {
			t.Errorf("unexpected %s", d)
		}
		got[d.Policy] = d
	}
	for id, paths := range want {
		d, ok := got[id]
		if !ok {
			t.Errorf("%s: no warning for resource.object has spec", id)
			continue
		}
		if !strings.Contains(d.Message, "never holds") || !containsAny(d.Hint, paths) {
			t.Errorf("%s: got %s, want a hint naming one of %v", id, d, paths)
		}
	}
}

// appliesToSome reports whether an action applies to resource type t.
func appliesToSome(c *Checker, t types.EntityType) bool {
	for _, a := range c.resolved.Actions {
		if a.AppliesTo != nil {
			for _, r := range a.AppliesTo.Resources {
				if r == t {
					return true
				}
			}
		}
	}
	return false
}

// versionsWithSpec lists the versions v of t's object (in the resolved
// schema) with a spec attribute.
func versionsWithSpec(c *Checker, t types.EntityType) []string {
	obj, ok := c.resolved.Entities[t].Shape[schemagen.AttrObject]
	if !ok {
		return nil
	}
	rec, _ := obj.Type.(resolved.RecordType)
	var out []string
	for v, a := range rec {
		if vr, ok := a.Type.(resolved.RecordType); ok && v != schemagen.AttrMetadata {
			if _, ok := vr["spec"]; ok {
				out = append(out, string(v))
			}
		}
	}
	sort.Strings(out)
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub+"?") {
			return true
		}
	}
	return false
}
