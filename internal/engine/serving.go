package engine

import (
	"sync/atomic"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// PolicySource is the policy set an authorizer decides with now: a store
// that reloads (internal/store), or one fixed set. A set may carry the
// schema it was validated against (a schema refresh swaps both at once).
type PolicySource interface {
	Current() *cedarlang.PolicySet
}

// FixedPolicies is a PolicySource that never changes.
type FixedPolicies struct{ Set *cedarlang.PolicySet }

// Current implements PolicySource.
func (f FixedPolicies) Current() *cedarlang.PolicySet { return f.Set }

// Serving is the engine of the policy set a PolicySource serves now. It
// builds one Engine per policy set and schema, so a reload drops every cache
// the previous set built; its conditions Evaluator needs no policy set at
// all (the callback evaluates what was signed, whatever serves now). Safe
// for concurrent use.
type Serving struct {
	policies PolicySource
	schema   *schemagen.Schema
	codec    *Codec
	opts     EngineOptions
	engine   atomic.Pointer[Engine]
	eval     atomic.Pointer[Evaluator]
}

// NewServing returns the engines of policies, deciding with each set's own
// schema or else schema, signing and verifying conditions with codec.
func NewServing(policies PolicySource, schema *schemagen.Schema, codec *Codec, opts EngineOptions) *Serving {
	return &Serving{policies: policies, schema: schema, codec: codec, opts: opts}
}

// Schema is the schema decisions use now: the serving set's, else the one
// Serving was made with.
func (s *Serving) Schema() *schemagen.Schema {
	if ps := s.policies.Current(); ps != nil && ps.Schema != nil {
		return ps.Schema
	}
	return s.schema
}

// Engine is the engine of the policy set serving now, or nil before one is
// loaded. The set and the schema it was validated against are read in one
// atomic load.
func (s *Serving) Engine() *Engine {
	ps := s.policies.Current()
	if ps == nil {
		return nil
	}
	schema := ps.Schema
	if schema == nil {
		schema = s.schema
	}
	if schema == nil {
		return nil
	}
	for {
		cur := s.engine.Load()
		if cur != nil && cur.Policies() == ps && cur.Schema() == schema {
			return cur
		}
		next := newEngineAfter(cur, schema, ps, s.codec, s.opts)
		if s.engine.CompareAndSwap(cur, next) {
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
		next := &Evaluator{Schema: schema, Codec: s.codec, Namespaces: s.opts.Namespaces}
		if s.eval.CompareAndSwap(cur, next) {
			return next
		}
	}
}

// CacheStats sums the caches of the engine serving now.
func (s *Serving) CacheStats() (entries, evictions int64) {
	if e := s.engine.Load(); e != nil {
		return e.CacheStats()
	}
	return 0, 0
}
