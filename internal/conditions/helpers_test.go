package conditions

import (
	"math/rand"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// newEngine is the engine of schema and policies with its conditions,
// signed with a fresh random key.
func newEngine(schema *schemagen.Schema, policies *cedarlang.PolicySet, opts engine.EngineOptions) *Engine {
	return New(engine.NewEngine(schema, policies, opts), NewCodec(RandomKeyring()))
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }
