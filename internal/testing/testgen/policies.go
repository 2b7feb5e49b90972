package testgen

import (
	"fmt"
	"strings"
)

// RBACLike generates n policies shaped like RBAC bindings against the
// embedded schema: a group or a user, a verb list, one resource type, mostly
// scoped to a namespace, plus a forbid every hundred policies.
func RBACLike(n int) string {
	resources := []string{"core::pods", "core::configmaps", "core::secrets", "apps::deployments", "core::serviceaccounts", "io::k8s::authorization::rbac::roles", "core::nodes", "core::namespaces"}
	verbSets := []string{
		`action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`,
		`action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"]`,
		`action in k8s::Action::"*"`,
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		principal := fmt.Sprintf(`principal in k8s::Group::"team-%d"`, i%200)
		if i%3 == 0 {
			principal = fmt.Sprintf(`principal == k8s::User::"user-%d"`, i)
		}
		res := resources[i%len(resources)]
		cond := fmt.Sprintf(" when { resource.namespace == \"ns-%d\" }", i%50)
		if res == "core::nodes" || res == "core::namespaces" {
			cond = ""
		}
		fmt.Fprintf(&b, "@id(\"rbac-%d\")\npermit(%s, %s, resource is %s)%s;\n", i, principal, verbSets[i%len(verbSets)], res, cond)
		if i%100 == 0 {
			fmt.Fprintf(&b, "@id(\"deny-%d\")\nforbid(%s, action == k8s::Action::\"delete\", resource is %s) when { resource has namespace && resource.namespace == \"kube-system\" };\n", i, principal, res)
		}
	}
	return b.String()
}
