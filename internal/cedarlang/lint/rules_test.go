package lint

import (
	"fmt"
	"strings"
	"testing"
)

// Lint warnings: each valid-but-suspicious policy gives its warning at its
// position; the fixed version gives none.
func TestLintWarnings(t *testing.T) {
	c := testChecker(t)
	cases := []struct {
		name, src, code, pos, msg, fixed string
	}{
		{"namespace compared to *", `@id("w")
permit (principal, action, resource is core::pods)
when { resource.namespace == "*" };`, CodeWildcardCompare, "3:30", `comparing to "*" never holds`,
			`@id("w")
permit (principal, action, resource is core::pods);`},
		{"name not equal to *", `@id("w")
forbid (principal, action, resource is core::secrets)
when { resource.name != "*" };`, CodeWildcardCompare, "3:25", "always holds",
			`@id("w")
forbid (principal, action, resource is core::secrets);`},
		{"is with an unknown type", `@id("w")
permit (principal, action, resource)
when { resource is core::deployment || resource is apps::deployments };`, CodeUnknownType, "3:17", "`is core::deployment` never holds",
			`@id("w")
permit (principal, action, resource)
when { resource is apps::deployments };`},
		{"like * matches all", `@id("w")
permit (principal, action, resource is core::pods)
when { resource.name like "*" };`, CodeLikeAll, "3:22", "matches every string",
			`@id("w")
permit (principal, action, resource is core::pods)
when { resource.name like "web-*" };`},
		{"forbid with arithmetic", `@id("w")
forbid (principal, action == k8s::Action::"update", resource is apps::deployments_scale)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has replicas && resource.object.v1.spec.replicas + 1 > 10 };`, CodeForbidCanError, "4:81", "can fail to evaluate (arithmetic can overflow)",
			`@id("w")
forbid (principal, action == k8s::Action::"update", resource is apps::deployments_scale)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has replicas && resource.object.v1.spec.replicas > 9 };`},
		{"forbid with an entity literal's attribute", `@id("w")
forbid (principal, action, resource is core::secrets)
when { k8s::User::"root".username == principal.username };`, CodeForbidCanError, "3:25", "entity literal",
			`@id("w")
forbid (principal, action, resource is core::secrets)
when { principal == k8s::User::"root" };`},
		{"forbid with a datetime computation", `@id("w")
forbid (principal, action, resource is core::secrets)
when { datetime("2024-01-01").offset(duration("1h")) > datetime("2024-01-01") };`, CodeForbidCanError, "3:31", "extension call offset",
			`@id("w")
forbid (principal, action, resource is core::secrets)
when { datetime("2024-01-01T01:00:00Z") > datetime("2024-01-01") };`},
		{"permit on objects for reads only", `@id("w")
permit (principal, action in [k8s::Action::"get"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`, CodeReadConditional, "2:20", "applies only to get",
			`@id("w")
permit (principal, action in [k8s::Action::"update", k8s::Action::"patch"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := c.Check([]File{{Name: "w.cedar", Data: []byte(tc.src)}})
			if res.Errors() != 0 || len(res.Diagnostics) == 0 {
				t.Fatalf("want one warning, got %v", res.Diagnostics)
			}
			d := res.Diagnostics[0]
			pos := fmt.Sprintf("%d:%d", d.Line, d.Column)
			if d.Severity != Warning || d.Code != tc.code || pos != tc.pos || !strings.Contains(d.Message, tc.msg) || d.Hint == "" {
				t.Errorf("got %s [%s %s] at %s, want [%s] at %s ~ %q", d, d.Severity, d.Code, pos, tc.code, tc.pos, tc.msg)
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

// A "*" subresource is read literally (as RBAC does): comparing the
// subresource to "*" is meaningful and draws no warning; the resource still does.
func TestWildcardSubresourceIsLiteral(t *testing.T) {
	c := testChecker(t)
	src := `@id("w")
permit (principal, action, resource is k8s::Resource)
when { resource has subresource && resource.subresource == "*" && resource.resource != "*" };`
	res := c.Check([]File{{Name: "w.cedar", Data: []byte(src)}})
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeWildcardCompare || res.Diagnostics[0].Column < 60 {
		t.Fatalf("want one wildcard-comparison warning on resource.resource, got %v", res.Diagnostics)
	}
}
