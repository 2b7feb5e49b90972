package engine

import (
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

func benchWhoCan(b *testing.B, n int, ns string) {
	az := NewEngine(embeddedschema.Schema(b), policytest.Set(b, testgen.RBACLike(n)), EngineOptions{})
	req := whoCanReq("get", "", "pods", "", ns, "")
	var rv AccessReview
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rv = whoCan(b, az, req)
	}
	b.ReportMetric(float64(len(rv.Allowed)+len(rv.Conditional)+len(rv.Denied)), "entries")
}

// who-can get pods -n ns-8, and across all namespaces, over 1,000 and
// 10,000 policies.
func BenchmarkWhoCan1000(b *testing.B)               { benchWhoCan(b, 1000, "ns-8") }
func BenchmarkWhoCan10000(b *testing.B)              { benchWhoCan(b, 10000, "ns-8") }
func BenchmarkWhoCanAllNamespaces10000(b *testing.B) { benchWhoCan(b, 10000, "") }
