package residual

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen/schematest"
)

// rbacLikePolicies generates n policies shaped like RBAC bindings: a group or
// a user, a verb list, one resource type, mostly scoped to a namespace.
func rbacLikePolicies(n int) string {
	resources := []string{"core::pods", "core::configmaps", "core::secrets", "apps::deployments", "core::serviceaccounts", "rbac::roles", "core::nodes", "core::namespaces"}
	verbSets := []string{
		`[k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`,
		`[k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"]`,
		`k8s::Action::"*"`,
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		principal := fmt.Sprintf(`principal in k8s::Group::"team-%d"`, i%200)
		if i%3 == 0 {
			principal = fmt.Sprintf(`principal == k8s::User::"user-%d"`, i)
		}
		res := resources[i%len(resources)]
		cond := fmt.Sprintf(` when { resource.namespace == "ns-%d" }`, i%50)
		if res == "core::nodes" || res == "core::namespaces" {
			cond = ""
		}
		verbs := verbSets[i%len(verbSets)]
		op := "in"
		fmt.Fprintf(&b, "@id(\"rbac-%d\")\npermit(%s, action %s %s, resource is %s)%s;\n", i, principal, op, verbs, res, cond)
		if i%100 == 0 {
			fmt.Fprintf(&b, "@id(\"deny-%d\")\nforbid(%s, action == k8s::Action::\"delete\", resource is %s) when { resource has namespace && resource.namespace == \"kube-system\" };\n", i, principal, res)
		}
	}
	return b.String()
}

func benchAuthorize(b *testing.B, n int, req *cedar.Request) {
	ps := mustPolicies(b, rbacLikePolicies(n))
	az := &Authorizer{Schema: schematest.Schema(), Policies: ps}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		az.Authorize(req, Options{})
	}
}

var benchRequest = resReq("someone", []string{"team-7", "team-42", "system:authenticated"}, "get", "", "pods", "", "ns-7", "web-1")

func BenchmarkAuthorize1000(b *testing.B)  { benchAuthorize(b, 1000, benchRequest) }
func BenchmarkAuthorize10000(b *testing.B) { benchAuthorize(b, 10000, benchRequest) }

// An open namespace (list across all namespaces) needs partial evaluation.
func BenchmarkAuthorizeOpenNamespace1000(b *testing.B) {
	benchAuthorize(b, 1000, resReq("someone", []string{"team-7"}, "list", "", "pods", "", "", ""))
}
