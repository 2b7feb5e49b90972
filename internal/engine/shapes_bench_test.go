package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchShapes decides requests of the set with other shapes
// (testgen.OtherShapes: relations, prefixes, a big group, break-glass
// forbids, username sets, disjunctions), each tenant distinct, so a
// perfect index keeps the cost flat as n grows.
func benchShapes(b *testing.B, n int) {
	benchDecisions(b, policySetOf(b, "shapes", testgen.OtherShapes(n)), testgen.OtherShapesRequests(n, 4096))
}

// go test -run '^$' -bench Shapes -benchtime 20000x ./internal/engine
func BenchmarkShapes1000(b *testing.B)   { benchShapes(b, 1000) }
func BenchmarkShapes10000(b *testing.B)  { benchShapes(b, 10000) }
func BenchmarkShapes100000(b *testing.B) { benchShapes(b, 100000) }

// benchFifth decides the fifth workload's requests (testgen.FifthRequests)
// over n of its policies: forbids keyed only on a like pattern or a set of
// uids, beside permits.
func benchFifth(b *testing.B, n int) {
	benchDecisions(b, policySetOf(b, "fifth", testgen.Fifth(n)), testgen.FifthRequests(n, 4096))
}

// go test -run '^$' -bench Fifth -benchtime 50000x ./internal/engine
func BenchmarkFifth1000(b *testing.B)   { benchFifth(b, 1000) }
func BenchmarkFifth100000(b *testing.B) { benchFifth(b, 100000) }

// benchRandom decides the random workload's requests
// (testgen.PredicateRequests) over n of its policies (as test/load's
// random workload draws them), with more distinct requests than the
// caches hold, as the server decides them: folded (a review from an API
// server that takes no conditions), or with conditions for one encoder
// (the server's, which carries at most wire.MaxConditions), or with every
// condition (a library caller's engine without an encoder).
func benchRandom(b *testing.B, n int, mode randomMode) {
	seed, o := uint64(1<<20+1), testgen.PredicateOptions{Valid: true, Selective: true, NoLabels: true, Templates: 300}
	reqs := testgen.PredicateRequests(n, 20000, seed, o)
	opts := EngineOptions{CacheSize: DefaultCacheSize}
	switch mode {
	case randomFolded:
		for _, r := range reqs {
			r.UnconditionalOnly = true
		}
	case randomEncoded:
		opts.EncodedOnly = encodesAll{}
	}
	e := NewEngine(embeddedschema.Schema(b), policySetOf(b, "random", testgen.RandomPredicates(n, seed, o)), opts)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), reqs[i%len(reqs)])
	}
}

type randomMode int

const (
	randomFolded randomMode = iota
	randomEncoded
	randomEvery
)

// encodesAll is an encoder every residual encodes with.
type encodesAll struct{}

func (encodesAll) Encodes(*Engine, Residual, DecisionType) bool { return true }

// go test -run '^$' -bench Random -benchtime 100000x ./internal/engine
func BenchmarkRandomFolded1000(b *testing.B)    { benchRandom(b, 1000, randomFolded) }
func BenchmarkRandomFolded100000(b *testing.B)  { benchRandom(b, 100000, randomFolded) }
func BenchmarkRandomEncoded1000(b *testing.B)   { benchRandom(b, 1000, randomEncoded) }
func BenchmarkRandomEncoded100000(b *testing.B) { benchRandom(b, 100000, randomEncoded) }
func BenchmarkRandomEvery1000(b *testing.B)     { benchRandom(b, 1000, randomEvery) }
func BenchmarkRandomEvery100000(b *testing.B)   { benchRandom(b, 100000, randomEvery) }
