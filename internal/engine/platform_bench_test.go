package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchPlatform decides requests of the platform shapes (testgen.Platform)
// over n policies, with the namespace lookup knowing the tenants'
// namespaces; n = 1 is the floor.
func benchPlatform(b *testing.B, n int) {
	const seed = 3
	set := policySetOf(b, "platform", testgen.Platform(n, seed, false))
	// The requests of the 1,000-policy mix, whatever n: the same requests
	// for every size.
	m := testgen.NewPlatformMix(1000, seed, false)
	reqs := testgen.PlatformRequests(1000, 4096, seed, false)
	e := NewEngine(embeddedschema.Schema(b), set, EngineOptions{Namespaces: platformNamespaces(testgen.PlatformNamespaces(m))})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), reqs[i%len(reqs)])
	}
}

// go test -run '^$' -bench Platform -benchtime 20000x ./internal/engine
func BenchmarkPlatform1(b *testing.B)      { benchPlatform(b, 1) }
func BenchmarkPlatform1000(b *testing.B)   { benchPlatform(b, 1000) }
func BenchmarkPlatform10000(b *testing.B)  { benchPlatform(b, 10000) }
func BenchmarkPlatform100000(b *testing.B) { benchPlatform(b, 100000) }
