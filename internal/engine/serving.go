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
// the previous set built. Safe for concurrent use.
type Serving struct {
	policies PolicySource
	schema   *schemagen.Schema
	opts     EngineOptions
	engine   atomic.Pointer[Engine]
}

// NewServing returns the engines of policies, deciding with each set's own
// schema or else schema.
func NewServing(policies PolicySource, schema *schemagen.Schema, opts EngineOptions) *Serving {
	return &Serving{policies: policies, schema: schema, opts: opts}
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
		next := newEngineAfter(cur, schema, ps, s.opts)
		if s.engine.CompareAndSwap(cur, next) {
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
