package residual

import (
	"testing"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/policies"
	"github.com/kcedar/kcedar/schemagen/schematest"
)

func benchAuthorize(b *testing.B, n int, req *cedar.Request) {
	ps := mustPolicies(b, policies.RBACLike(n))
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
