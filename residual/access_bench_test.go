package residual

import (
	"fmt"
	"strings"
	"testing"
)

// accessBenchPolicies is n RBAC-like policies (the shape of kcedar rbac
// convert's output): group and user bindings on eight resource types,
// namespaced rules, a forbid per hundred.
func accessBenchPolicies(n int) string {
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

func benchWhoCan(b *testing.B, n int, ns string) {
	az := NewEngine(realSchema(b), mustPolicies(b, accessBenchPolicies(n)), NewCodec(RandomKeyring()), EngineOptions{})
	req := whoCanReq("get", "", "pods", "", ns, "")
	var rv AccessReview
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rv = az.WhoCan(req)
	}
	b.ReportMetric(float64(len(rv.Allowed)+len(rv.Conditional)+len(rv.Denied)), "entries")
}

// who-can get pods -n ns-8, and across all namespaces, over 1,000 and
// 10,000 policies.
func BenchmarkWhoCan1000(b *testing.B)               { benchWhoCan(b, 1000, "ns-8") }
func BenchmarkWhoCan10000(b *testing.B)              { benchWhoCan(b, 10000, "ns-8") }
func BenchmarkWhoCanAllNamespaces10000(b *testing.B) { benchWhoCan(b, 10000, "") }
