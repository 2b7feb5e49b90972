package testgen

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"

	"github.com/kcedar/kcedar/internal/entities"
)

// The values ObjectPolicies and ObjectAdmission draw from.
var (
	eqNodes      = []string{"n1", "n2"}
	eqEnvs       = []string{"prod", "dev"}
	eqNames      = []string{"web-1", "db-1"}
	eqNamespaces = []string{"team-a", "team-b"}
)

// ObjectPolicies is n random policies (ids g0, g1...) on pods, their exec
// subresource and every resource, whose conditions read the objects
// admission sees (resource.object, resource.oldObject), the name, the
// namespace and the user: for properties of conditional decisions.
func ObjectPolicies(rng *rand.Rand, n int) string {
	atoms := []func() string{
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == %q)`, pickOf(rng, eqNodes))
		},
		func() string {
			return fmt.Sprintf(`(resource has oldObject && resource.oldObject has v1 && resource.oldObject.v1 has spec && resource.oldObject.v1.spec has nodeName && resource.oldObject.v1.spec.nodeName == %q)`, pickOf(rng, eqNodes))
		},
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env") == %q)`, pickOf(rng, eqEnvs))
		},
		func() string {
			return `(resource has object && resource has oldObject && resource.object.metadata has labels && resource.oldObject.metadata has labels && resource.object.metadata.labels == resource.oldObject.metadata.labels)`
		},
		func() string {
			return `(resource has object && resource has oldObject && resource.object has v1 && resource.oldObject has v1 && resource.object.v1 has spec && resource.oldObject.v1 has spec && resource.object.v1.spec == resource.oldObject.v1.spec)`
		},
		func() string { return `resource has oldObject` },
		func() string { return `!(resource has oldObject)` },
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has priority && resource.object.v1.spec.priority + 1 > 5)`
		},
		func() string {
			return fmt.Sprintf(`(resource has object && resource.object.metadata has finalizers && resource.object.metadata.finalizers.contains(%q))`, pickOf(rng, []string{"a/x", "b/y"}))
		},
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has command && resource.object.v1.command.contains("sh"))`
		},
		func() string { return fmt.Sprintf(`resource.name like %q`, pickOf(rng, []string{"web-*", "*-1"})) },
		func() string {
			return fmt.Sprintf(`(resource has namespace && resource.namespace == %q)`, pickOf(rng, eqNamespaces))
		},
		func() string { return fmt.Sprintf(`principal.username == %q`, pickOf(rng, []string{"alice", "bob"})) },
		func() string {
			return `(resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has containers && resource.object.v1.spec.containers.isEmpty())`
		},
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		effect := "permit"
		if rng.Intn(10) < 3 {
			effect = "forbid"
		}
		action := pickOf(rng, []string{"action", `action == k8s::Action::"create"`, `action in [k8s::Action::"update", k8s::Action::"patch"]`, `action in [k8s::Action::"delete", k8s::Action::"deletecollection"]`, `action == k8s::Action::"get"`})
		resource := pickOf(rng, []string{"resource", "resource is core::pods", "resource is core::pods_exec"})
		principal := pickOf(rng, []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`})
		var conds []string
		k := rng.Intn(4)
		for j := 0; j < k; j++ {
			a := atoms[rng.Intn(len(atoms))]()
			if rng.Intn(5) == 0 {
				a = "!(" + a + ")"
			}
			conds = append(conds, a)
		}
		op := pickOf(rng, []string{" && ", " || "})
		fmt.Fprintf(&b, "@id(\"g%d\")\n%s(%s, %s, %s)", i, effect, principal, action, resource)
		if len(conds) > 0 {
			kw := "when"
			if rng.Intn(6) == 0 {
				kw = "unless"
			}
			fmt.Fprintf(&b, " %s { %s }", kw, strings.Join(conds, op))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// objectPod is a random Pod named name in ns, as JSON.
func objectPod(rng *rand.Rand, name, ns string) []byte {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": ns}}
	md := pod["metadata"].(map[string]any)
	if rng.Intn(3) > 0 {
		md["labels"] = map[string]any{"env": pickOf(rng, eqEnvs)}
	}
	if rng.Intn(3) == 0 {
		md["finalizers"] = []any{pickOf(rng, []string{"a/x", "b/y"})}
	}
	spec := map[string]any{}
	if rng.Intn(4) > 0 {
		spec["nodeName"] = pickOf(rng, eqNodes)
	}
	if rng.Intn(3) == 0 {
		spec["priority"] = pickOf(rng, []any{0, 10, json.Number("9223372036854775807")})
	}
	if rng.Intn(2) == 0 {
		spec["containers"] = []any{map[string]any{"name": "c", "image": "nginx"}}
	} else if rng.Intn(2) == 0 {
		spec["containers"] = []any{}
	}
	if rng.Intn(6) > 0 {
		pod["spec"] = spec
	}
	if rng.Intn(10) == 0 {
		pod["apiVersion"] = "v2" // a version the schema does not serve
	}
	b, _ := json.Marshal(pod)
	return b
}

// AdmissionCase is a request on pods as it is authorized (Req: its name or
// namespace may be open) and as admission sees it.
type AdmissionCase struct {
	Req                    *entities.Request
	Operation, Subresource string
	Namespace, Name        string
	Object, OldObject      []byte
}

// ObjectAdmission is a random AdmissionCase for ObjectPolicies: a create,
// update, patch, delete, deletecollection or exec of a pod by alice or bob.
func ObjectAdmission(rng *rand.Rand) AdmissionCase {
	user := entities.UserInfo{Name: pickOf(rng, []string{"alice", "bob"})}
	if rng.Intn(2) == 0 {
		user.Groups = []string{"dev"}
	}
	verb := pickOf(rng, []string{"create", "update", "patch", "delete", "deletecollection", "exec-get", "exec-create"})
	name, ns := pickOf(rng, eqNames), pickOf(rng, eqNamespaces)
	req := &entities.Request{User: user, ResourceRequest: true, Resource: "pods", APIVersion: "v1", Namespace: ns, Name: name}
	data := AdmissionCase{Namespace: ns, Name: name}
	if rng.Intn(3) == 0 || verb == "deletecollection" {
		req.Name = "" // open name: all names, or not known yet
	}
	if rng.Intn(4) == 0 {
		req.Namespace = ""
	}
	switch verb {
	case "create":
		req.Verb, data.Operation, data.Object = verb, "CREATE", objectPod(rng, name, ns)
	case "update", "patch":
		req.Verb = verb
		if rng.Intn(5) == 0 { // the update creates the object
			data.Operation, data.Object = "CREATE", objectPod(rng, name, ns)
		} else {
			data.Operation, data.Object, data.OldObject = "UPDATE", objectPod(rng, name, ns), objectPod(rng, name, ns)
		}
	case "delete", "deletecollection":
		req.Verb, data.Operation, data.OldObject = verb, "DELETE", objectPod(rng, name, ns)
	case "exec-get", "exec-create":
		req.Verb = strings.TrimPrefix(verb, "exec-")
		req.Subresource, data.Subresource = "exec", "exec"
		opts := map[string]any{"apiVersion": "v1", "kind": "PodExecOptions", "command": []any{pickOf(rng, []string{"sh", "ls"})}}
		b, _ := json.Marshal(opts)
		data.Operation, data.Object = "CONNECT", b
	}
	data.Req = req
	return data
}

// pickOf is a random element of xs.
func pickOf[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }
