package cedar

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/schemagen"
)

func embeddedSchema(t testing.TB) *schemagen.Schema {
	t.Helper()
	docs, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := schemagen.Generate(docs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
	s := embeddedSchema(t)
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
