// Package handle holds what kcedar's public packages wrap. Each public type is
// defined on a handle type (package schemagen: `type Schema handle.Schema`),
// so it has only the methods its package gives it, yet another public
// package, or cmd, converts it back to the handle and reaches the internal
// value: no public package exports an internal type or an accessor for one.
package handle

import (
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
)

// Schema is a typed Cedar schema of a cluster (package schemagen).
type Schema struct{ schema *schemagen.Schema }

// NewSchema wraps s.
func NewSchema(s *schemagen.Schema) Schema { return Schema{schema: s} }

// Get is the wrapped schema.
func (h Schema) Get() *schemagen.Schema { return h.schema }

// Keyring holds the keys that sign and verify conditions (package residual).
type Keyring struct{ keys *engine.Keyring }

// NewKeyring wraps k.
func NewKeyring(k *engine.Keyring) Keyring { return Keyring{keys: k} }

// Get is the wrapped keyring.
func (h Keyring) Get() *engine.Keyring { return h.keys }

// Evaluator evaluates signed conditions with no policy set (package
// residual).
type Evaluator struct{ source func() *engine.Evaluator }

// NewEvaluator wraps the evaluator source returns at each call (the schema
// it evaluates with may be swapped by a schema refresh).
func NewEvaluator(source func() *engine.Evaluator) Evaluator { return Evaluator{source: source} }

// Get is the evaluator serving now, or nil before a schema is known.
func (h Evaluator) Get() *engine.Evaluator { return h.source() }

// Authorizer is kcedar's authorizer (package cedar): the engines of a policy
// source, and the reloading store that source is, if it is one.
type Authorizer struct {
	serving *engine.Serving
	store   *store.Store
}

// NewAuthorizer is the authorizer of the policy sets policies serves (a
// reloading *store.Store, or engine.FixedPolicies), deciding with each set's
// schema or else schema, signing conditions with codec.
func NewAuthorizer(policies engine.PolicySource, schema *schemagen.Schema, codec *engine.Codec, opts engine.EngineOptions) Authorizer {
	st, _ := policies.(*store.Store)
	return Authorizer{serving: engine.NewServing(policies, schema, codec, opts), store: st}
}

// Serving is the engine of the policy set serving now.
func (h Authorizer) Serving() *engine.Serving { return h.serving }

// Store is the reloading store the authorizer follows, or nil for a fixed
// set.
func (h Authorizer) Store() *store.Store { return h.store }
