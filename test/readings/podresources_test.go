package readings

import (
	"encoding/json"
	"testing"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// effectiveLimit allows a pod whose effective cpu limit is present and at
// most 3, in the fail-closed idiom.
const effectiveLimit = `
@id("everyone")
permit (principal, action == k8s::Action::"create", resource is core::pods);
@id("cpu-at-most-3")
forbid (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object }
unless {
  resource has object && resource.object has effectiveResources &&
  resource.object.effectiveResources.limits.hasTag("cpu") &&
  resource.object.effectiveResources.limits.getTag("cpu") has milli &&
  resource.object.effectiveResources.limits.getTag("cpu").milli <= 3000
};`

func container(name string, limits map[string]any) map[string]any {
	c := map[string]any{"name": name, "image": "x"}
	if limits != nil {
		c["resources"] = map[string]any{"limits": limits}
	}
	return c
}

// Pods' effectiveResources count containers, init containers and
// pod-level limits as Kubernetes does, and a limit is present only where
// it bounds the pod.
func TestEffectiveResources(t *testing.T) {
	d := decider(t, embeddedschema.Schema(t), effectiveLimit)
	cpu := func(q string) map[string]any { return map[string]any{"cpu": q} }
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"containers sum to 2.5", map[string]any{"containers": []any{container("a", cpu("1")), container("b", cpu("1500m"))}}, "Allow"},
		{"containers sum to exactly 3", map[string]any{"containers": []any{container("a", cpu("1")), container("b", cpu("2"))}}, "Allow"},
		{"containers sum to 3.5", map[string]any{"containers": []any{container("a", cpu("2")), container("b", cpu("1500m"))}}, "Deny"},
		{"an init container of 4 dominates", map[string]any{"initContainers": []any{container("i", cpu("4"))}, "containers": []any{container("a", cpu("1"))}}, "Deny"},
		{"a container without a limit is unbounded", map[string]any{"containers": []any{container("a", cpu("1")), container("b", nil)}}, "Deny"},
		{"a pod-level limit bounds it", map[string]any{"resources": map[string]any{"limits": cpu("2")}, "containers": []any{container("a", cpu("1")), container("b", nil)}}, "Allow"},
		{"a quantity that does not parse", map[string]any{"containers": []any{container("a", cpu("lots"))}}, "Deny"},
		{"a limit below a milli-unit", map[string]any{"containers": []any{container("a", cpu("1")), container("b", cpu("1u"))}}, "Deny"},
		{"a hostile exponent (decoding would not return)", map[string]any{"containers": []any{container("a", cpu("1E-999999999"))}}, "Deny"},
		{"a number-like string elsewhere is not a quantity", map[string]any{"containers": []any{
			map[string]any{"name": "a", "image": "x", "env": []any{map[string]any{"name": "N", "value": "1E-999999999"}}, "resources": map[string]any{"limits": cpu("1")}}}}, "Allow"},
	} {
		obj, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "ns"}, "spec": tc.spec})
		if err != nil {
			t.Fatal(err)
		}
		req := &entities.Request{User: entities.UserInfo{Name: "alice"}, Verb: "create", ResourceRequest: true, Resource: "pods", Namespace: "ns"}
		rep := d.Decide(req, &conditions.Admission{Operation: "CREATE", Object: obj})
		if rep.Outcome != tc.want {
			t.Errorf("%s: %s (%s %s), want %s", tc.name, rep.Outcome, rep.OutcomeReason, rep.OutcomeError, tc.want)
		}
	}
}
