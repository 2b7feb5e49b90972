package engine

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

func benchAuthorize(b *testing.B, n int, req *entities.Request) {
	ps := policytest.Set(b, testgen.RBACLike(n))
	az := NewEngine(schematest.Schema(), ps, EngineOptions{})
	durations := make([]time.Duration, 0, b.N)
	// Steady state: the set-up's garbage (parsing a large set) collected
	// first, not by a GC running beside the timed decisions.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		az.Authorize(context.Background(), req).FailureDecision()
		durations = append(durations, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "median-ns")
}

var benchRequest = policytest.ResourceRequest("someone", []string{"team-7", "team-42", "system:authenticated"}, "get", "", "pods", "", "ns-7", "web-1")

func BenchmarkAuthorize1000(b *testing.B)  { benchAuthorize(b, 1000, benchRequest) }
func BenchmarkAuthorize10000(b *testing.B) { benchAuthorize(b, 10000, benchRequest) }

// An open namespace (list across all namespaces) needs partial evaluation.
func BenchmarkAuthorizeOpenNamespace1000(b *testing.B) {
	benchAuthorize(b, 1000, policytest.ResourceRequest("someone", []string{"team-7"}, "list", "", "pods", "", "", ""))
}

// The policy-shape zoo (internal/testing/testgen/zoo): decisions over a mix of
// requests, each timed; the metric is the median.
func benchZoo(b *testing.B, n int) { benchZooAudit(b, n, 0) }

// benchZooAudit is benchZoo with every auditEvery-th policy in audit mode
// (0: none).
func benchZooAudit(b *testing.B, n, auditEvery int) {
	s := embeddedschema.Schema(b)
	ps, err := zoo.PolicySet(n, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i, p := range ps.Policies {
		if auditEvery > 0 && i%auditEvery == 0 {
			p.Enforcement = cedarlang.Audit
		}
	}
	az := NewEngine(s, ps, EngineOptions{})
	reqs := zoo.Requests(n, 4096, 2)
	durations := make([]time.Duration, 0, b.N)
	// Steady state: the set-up's garbage (parsing a large set) collected
	// first, not by a GC running beside the timed decisions.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := reqs[i%len(reqs)]
		t0 := time.Now()
		az.Authorize(context.Background(), req).FailureDecision()
		durations = append(durations, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "median-ns")
}

func BenchmarkZoo1000(b *testing.B)   { benchZoo(b, 1000) }
func BenchmarkZoo10000(b *testing.B)  { benchZoo(b, 10000) }
func BenchmarkZoo100000(b *testing.B) { benchZoo(b, 100000) }

// The zoo with 10% of its policies in audit mode: audit policies are
// indexed and evaluated like the rest, so the cost should stay flat.
func BenchmarkZoo1000Audit10(b *testing.B)  { benchZooAudit(b, 1000, 10) }
func BenchmarkZoo10000Audit10(b *testing.B) { benchZooAudit(b, 10000, 10) }
