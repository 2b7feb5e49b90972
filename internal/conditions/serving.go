package conditions

import (
	"sync/atomic"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Serving is the engine of the policy set a PolicySource serves now
// (engine.Serving) with its conditions: one Engine per engine, so the
// conditions' evaluator is built once per policy set and schema. Its own
// Evaluator needs no policy set at all (the callback evaluates what was
// signed, whatever serves now). Safe for concurrent use.
type Serving struct {
	engines    *engine.Serving
	codec      *Codec
	namespaces entities.NamespaceLookup
	current    atomic.Pointer[Engine]
	eval       atomic.Pointer[Evaluator]
}

// NewServing returns the engines of policies (engine.NewServing) with their
// conditions, signed and verified with codec.
func NewServing(policies engine.PolicySource, schema *schemagen.Schema, codec *Codec, opts engine.EngineOptions) *Serving {
	return &Serving{engines: engine.NewServing(policies, schema, opts), codec: codec, namespaces: opts.Namespaces}
}

// Schema is the schema decisions use now (engine.Serving.Schema).
func (s *Serving) Schema() *schemagen.Schema { return s.engines.Schema() }

// CacheStats sums the caches of the engine serving now.
func (s *Serving) CacheStats() (entries, evictions int64) { return s.engines.CacheStats() }

// Engine is the engine of the policy set serving now with its conditions,
// or nil before one is loaded.
func (s *Serving) Engine() *Engine {
	e := s.engines.Engine()
	if e == nil {
		return nil
	}
	for {
		cur := s.current.Load()
		if cur != nil && cur.Engine == e {
			return cur
		}
		next := New(e, s.codec)
		if s.current.CompareAndSwap(cur, next) {
			return next
		}
	}
}

// Evaluator evaluates conditions against admission data with the schema
// serving now; it needs no policy set, so the conditions callback answers
// before the first set loads and whatever set serves. nil without a schema.
func (s *Serving) Evaluator() *Evaluator {
	schema := s.Schema()
	if schema == nil {
		return nil
	}
	for {
		cur := s.eval.Load()
		if cur != nil && cur.Schema == schema {
			return cur
		}
		next := &Evaluator{Schema: schema, Codec: s.codec, Namespaces: s.namespaces}
		if s.eval.CompareAndSwap(cur, next) {
			return next
		}
	}
}
