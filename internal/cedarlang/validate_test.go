package cedarlang

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

var validateCorpus = `
@id("ok-scoped") permit (principal, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods) when { resource.namespace == "dev" };
@id("ok-unscoped") permit (principal, action, resource) when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
@id("bad-unscoped") permit (principal, action, resource) when { resource.object.v1.spec.nodeName == "n1" };
@id("bad-namespace") permit (principal, action, resource) when { resource.namespace == "dev" };
@id("ok-namespace") permit (principal, action, resource) when { resource has namespace && resource.namespace == "dev" };
@id("bad-typo") permit (principal, action == k8s::Action::"create", resource is core::pods) when { resource has object && resource.object has v1 && resource.object.v1.spec.nodeNam == "a" };
@id("bad-type") permit (principal, action, resource is core::pods) when { resource.name == 1 };
@id("bad-approve") permit (principal, action == k8s::Action::"approve", resource is core::pods);
@id("ok-approve") permit (principal, action == k8s::Action::"approve", resource is io::k8s::certificates::signers);
@id("bad-group") permit (principal == k8s::Group::"dev", action, resource);
@id("ok-principal") permit (principal, action in k8s::Action::"*", resource is core::nodes) when { principal is k8s::Node && resource.name == principal.name };
@id("bad-principal") permit (principal, action, resource) when { principal.namespace == "a" };
@id("mentions-action") permit (principal, action, resource is core::pods) when { action == k8s::Action::"get" && resource.nmespace == "a" };
@id("bad-reads-object") permit (principal, action in [k8s::Action::"get", k8s::Action::"create"], resource) when { resource has oldObject && resource.oldObject.v1.spec == resource.oldObject.v1.spec };
@id("bad-user-name") permit (principal is k8s::User, action, resource is k8s::NonResourceURL) when { principal.name == resource.path };
`

// normalize drops what differs only in which action cedar-go blames.
var blamedAction = regexp.MustCompile(`in context for k8s::Action::"[^"]*"`)

func messages(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, blamedAction.ReplaceAllString(e.Error(), "in context for an action"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Collapsing equivalent actions (collapse) changes how long validation
// takes, not what it finds.
func TestValidateCollapseEquivalent(t *testing.T) {
	s := embeddedschema.Schema(t)
	fast, err := NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	slow.noCollapse = true
	ps, err := ParsePolicies("corpus.cedar", []byte(validateCorpus))
	if err != nil {
		t.Fatal(err)
	}
	a, b := fast.ValidateEach(ps), slow.ValidateEach(ps)
	for i, p := range ps {
		ma, mb := messages(a[i]), messages(b[i])
		if !slices.Equal(ma, mb) {
			t.Errorf("%s: collapsed:\n  %s\nfull:\n  %s", p.ID, strings.Join(ma, "\n  "), strings.Join(mb, "\n  "))
		}
		if strings.HasPrefix(p.ID, "ok-") != (len(mb) == 0) {
			t.Errorf("%s: %v", p.ID, mb)
		}
	}
	// Validate and ValidateEach agree.
	if got, want := len(fast.Validate(ps)), 0; got == want {
		t.Error("Validate found nothing")
	}
	for _, e := range fast.Validate(ps) {
		if !strings.HasPrefix(e.Error(), "corpus.cedar:") || !strings.Contains(e.Error(), ": policy bad-") && !strings.Contains(e.Error(), ": policy mentions-") {
			t.Errorf("Validate: %v", e)
		}
	}
}

// Policies that differ only in string literals share a shape (and so one
// type check); anything that can change a verdict makes another shape.
func TestShapeKey(t *testing.T) {
	key := func(src string) [32]byte {
		t.Helper()
		ps, err := ParsePolicies("k.cedar", []byte(src))
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: %v", src, err)
		}
		k, ok := shapeKey(ps[0].AST, map[types.EntityType]bool{"k8s::Action": true})
		if !ok {
			t.Fatalf("%s: no shape key", src)
		}
		return k
	}
	base := `@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`
	same := []string{
		`@id("b") @reason("other") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "yy" && ["c", "d"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("h") };`,
	}
	same = append(same,
		`@id("a") permit(principal in k8s::Group::"h", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		// A pattern types as any other: its text is not part of the shape.
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "v*-x" && principal.groups.contains("g") };`)
	different := []string{
		`@id("a") permit(principal in k8s::User::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") forbid(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::secrets) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.name == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == 1 && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b", "c"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource["namespace"] == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") } unless { false };`,
		`@id("a") permit(principal in k8s::Group::"g", action, resource is core::pods) when { resource.namespace == "x" && ["a", "b"].contains(resource.name) && principal.username like "u*" && principal.groups.contains("g") && k8s::User::"x" == principal };`,
	}
	k := key(base)
	for _, s := range same {
		if key(s) != k {
			t.Errorf("different shape, want the same:\n%s\n%s", base, s)
		}
	}
	for _, s := range different {
		if key(s) == k {
			t.Errorf("same shape, want different:\n%s\n%s", base, s)
		}
	}
	if key(`permit(principal, action, resource) when { action == k8s::Action::"get" };`) == key(`permit(principal, action, resource) when { action == k8s::Action::"nosuch" };`) {
		t.Error("action ids must be kept")
	}
	if key(`permit(principal, action, resource) when { principal == k8s::User::"a" };`) != key(`permit(principal, action, resource) when { principal == k8s::User::"b" };`) {
		t.Error("user ids need not be kept")
	}
	// Extension call arguments are kept: the validator parses them.
	if key(`permit(principal, action, resource) when { ip("10.0.0.1").isLoopback() };`) == key(`permit(principal, action, resource) when { ip("not an ip").isLoopback() };`) {
		t.Error("extension arguments must be kept")
	}
}
