package engine

import (
	"testing"

	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchFifth decides the fifth workload's requests (testgen.FifthRequests)
// over n of its policies: forbids keyed only on a like pattern or a set of
// uids, beside permits.
func benchFifth(b *testing.B, n int) {
	benchDecisions(b, policySetOf(b, "fifth", testgen.Fifth(n)), testgen.FifthRequests(n, 4096))
}

// go test -run '^$' -bench Fifth -benchtime 50000x ./internal/engine
func BenchmarkFifth1(b *testing.B)      { benchFifth(b, 1) }
func BenchmarkFifth1000(b *testing.B)   { benchFifth(b, 1000) }
func BenchmarkFifth100000(b *testing.B) { benchFifth(b, 100000) }
