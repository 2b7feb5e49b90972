package readings

import (
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// stringComparing is how policies compared quantities and int-or-string
// fields before the typed readings: as strings. They keep validating and
// deciding the same way.
const stringComparing = `
@id("everyone")
permit (principal, action == k8s::Action::"create", resource is core::pods);
@id("no-cpu-2")
forbid (principal, action == k8s::Action::"create", resource is core::pods)
when {
  resource has object && resource.object has v1 && resource.object.v1 has spec &&
  resource.object.v1.spec has overhead && resource.object.v1.spec.overhead.hasTag("cpu") &&
  resource.object.v1.spec.overhead.getTag("cpu") == "2"
};
@id("max-unavailable-25")
permit (principal, action == k8s::Action::"create", resource is apps::deployments)
when {
  resource has object && resource.object has v1 && resource.object.v1 has spec &&
  resource.object.v1.spec has strategy && resource.object.v1.spec.strategy has rollingUpdate &&
  resource.object.v1.spec.strategy.rollingUpdate has maxUnavailable &&
  resource.object.v1.spec.strategy.rollingUpdate.maxUnavailable == "25%"
};`

func TestStringComparingPoliciesStillWork(t *testing.T) {
	s := embeddedschema.Schema(t)
	c, err := lint.NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	res := c.Check([]lint.File{{Name: "compat.cedar", Data: []byte(stringComparing)}})
	if res.Errors() != 0 {
		t.Fatalf("string-comparing policies no longer validate: %+v", res)
	}
	d := decider(t, s, stringComparing)
	for _, tc := range []struct {
		cpu  any
		want string
	}{{"2", "Deny"}, {"2000m", "Allow"}, {"3", "Allow"}} {
		obj := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"a"}],"overhead":{"cpu":"` + tc.cpu.(string) + `"}}}`)
		req := &entities.Request{User: entities.UserInfo{Name: "alice"}, Verb: "create", ResourceRequest: true, Resource: "pods", Namespace: "ns"}
		if rep := d.Decide(req, &conditions.Admission{Operation: "CREATE", Object: obj}); rep.Outcome != tc.want {
			t.Errorf("overhead cpu %v: %s, want %s (a string comparison)", tc.cpu, rep.Outcome, tc.want)
		}
	}
}
