package cedarlang_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// Candidates alone over the zoo: the index lookup, without evaluation.
func benchCandidates(b *testing.B, n int) {
	ps, err := zoo.PolicySet(n, 1)
	if err != nil {
		b.Fatal(err)
	}
	s := schematest.Schema()
	reqs := zoo.Requests(n, 4096, 2)
	qs := make([]cedarlang.CandidateQuery, len(reqs))
	for i, r := range reqs {
		qs[i] = cedarlang.NewCandidateQuery(r, entities.ResolveTarget(s, r), entities.Verbs(s, r)[0])
	}
	durations := make([]time.Duration, 0, b.N)
	// Steady state: the set-up's garbage (parsing a large set) collected
	// first, not by a GC running beside the timed decisions.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ps.Candidates(qs[i%len(qs)])
		durations = append(durations, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "median-ns")
}

func BenchmarkCandidatesZoo1000(b *testing.B)   { benchCandidates(b, 1000) }
func BenchmarkCandidatesZoo10000(b *testing.B)  { benchCandidates(b, 10000) }
func BenchmarkCandidatesZoo100000(b *testing.B) { benchCandidates(b, 100000) }
