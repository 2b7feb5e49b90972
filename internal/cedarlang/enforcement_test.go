package cedarlang

import (
	"strings"
	"testing"
)

// @enforcement: enforce is the default, audit marks an audit policy, any
// other value is an error at the policy's line:column, and unknown
// annotations stay ignored.
func TestEnforcementAnnotation(t *testing.T) {
	ps, err := ParsePolicies("p.cedar", []byte(`@id("a") permit(principal, action, resource);
@id("b") @enforcement("enforce") @owner("team-a") permit(principal, action, resource);
@id("c") @enforcement("audit") forbid(principal, action, resource);
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Enforcement{Enforce, Enforce, Audit} {
		if ps[i].Enforcement != want || ps[i].IsAudit() != (want == Audit) {
			t.Errorf("%s: %v, want %v", ps[i].ID, ps[i].Enforcement, want)
		}
	}
	for _, bad := range []string{`dryrun`, `Audit`, ``} {
		_, err := ParsePolicies("p.cedar", []byte("\n  @id(\"x\") /* c */ @enforcement(\""+bad+"\") permit(principal, action, resource);"))
		if err == nil || !strings.HasPrefix(err.Error(), "p.cedar:2:20: @enforcement(") {
			t.Errorf("@enforcement(%q): %v", bad, err)
		}
	}
}
