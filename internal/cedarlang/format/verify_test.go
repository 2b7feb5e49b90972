package format

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

// twoPolicies is a file of two written policies.
func twoPolicies(t *testing.T) *cedarlex.File {
	t.Helper()
	var f cedarlex.File
	for _, id := range []string{"a", "b"} {
		f.Comment("policy " + id)
		err := f.Add(&cedarlex.Policy{
			Annotations: []cedarlex.Annotation{{Key: "id", Value: id}},
			Principal:   cedarlex.ScopeEq(types.NewEntityUID("k8s::User", types.String(id))),
			When:        []cedarlex.Expr{cedarlex.Resource().Attr("namespace").Eq(cedarlex.Str(id))},
		})
		if err != nil {
			t.Fatal(err)
		}
		f.Blank()
	}
	return &f
}

func TestVerifyAcceptsTheWrittenFile(t *testing.T) {
	f := twoPolicies(t)
	ps, err := Verify("w.cedar", f.Bytes(), f.Built())
	if err != nil || len(ps) != 2 {
		t.Fatalf("%d policies, %v", len(ps), err)
	}
	// Laid out by fmt, it is still the same policies.
	laid, err := Source("w.cedar", f.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify("w.cedar", laid.Text, f.Built()); err != nil {
		t.Fatal(err)
	}
}

// Whatever turns text into other policies, Verify refuses: a policy more,
// one less, one changed, ids swapped, a file that does not parse.
func TestVerifyRefusesOtherPolicies(t *testing.T) {
	f := twoPolicies(t)
	text := string(f.Bytes())
	cases := map[string]string{
		"injected":            text + "@id(\"c\")\npermit (principal, action, resource);\n",
		"injected without id": strings.Replace(text, "// policy b\n", "// policy b\npermit (principal, action, resource);\n", 1),
		"swallowed":           strings.Replace(text, "// policy b\n", "// policy b", 1),
		"changed":             strings.Replace(text, `resource.namespace == "b"`, `resource.namespace == "c"`, 1),
		"widened":             strings.Replace(text, `principal == k8s::User::"b"`, `principal`, 1),
		"swapped":             strings.NewReplacer(`@id("a")`, `@id("b")`, `@id("b")`, `@id("a")`).Replace(text),
		"broken":              text + "permit (",
	}
	for name, bad := range cases {
		if _, err := Verify("w.cedar", []byte(bad), f.Built()); err == nil || !strings.Contains(err.Error(), "a bug in kcedar") {
			t.Errorf("%s: %v\n%s", name, err, bad)
		}
	}
}

// A file over cedarlang.MaxPolicyFileBytes is checked in parts: as a
// whole, and a policy injected into one of its parts is found.
func TestVerifyFileOverTheLimit(t *testing.T) {
	var f cedarlex.File
	long := strings.Repeat("v", 64<<10)
	for i := 0; f.Len() == 0 || len(f.Bytes()) <= cedarlang.MaxPolicyFileBytes; i++ {
		f.Comment("policy " + long[:100])
		err := f.Add(&cedarlex.Policy{Blank: true, Annotations: []cedarlex.Annotation{{Key: "id", Value: fmt.Sprint(i)}},
			When: []cedarlex.Expr{cedarlex.Resource().Attr("name").Eq(cedarlex.Str(long))}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ps, err := VerifyFile("big.cedar", &f)
	if err != nil || len(ps) != f.Len() {
		t.Fatalf("%d policies of %d: %v", len(ps), f.Len(), err)
	}
	text := f.Bytes()
	cut := f.Built()[f.Len()/2].End
	injected := string(text[:cut]) + "permit (principal, action, resource);\n" + string(text[cut:])
	if _, err := Verify("big.cedar", []byte(injected), f.Built()); err == nil {
		t.Error("Verify of a file over the limit passed")
	}
	if _, err := verifyParts("big.cedar", []byte(injected), f.Built()); err == nil {
		t.Error("a policy injected into a file over the limit passed")
	}
	// The newlines ending a comment made spaces (the same length, so the
	// parts are cut where they were): the comment swallows an @id.
	swallowed := strings.Replace(string(text), "\n\n@id(\"1\")", "  @id(\"1\")", 1)
	if _, err := verifyParts("big.cedar", []byte(swallowed), f.Built()); err == nil {
		t.Error("a policy swallowed in a file over the limit passed")
	}
}
