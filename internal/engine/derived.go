package engine

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// What is derived from a residual outside the decision (a condition encoded
// from it, say) is cached by the engine that left the residual: with the
// residual's memo entry when partial evaluation memoized it, else in a
// bounded cache keyed by the policy, the entity type and the expression
// (hashExpr, a collision resolved by ast.Equal). Either goes with the engine,
// so a reload drops it with the policy set.

// derivedKey is the key of a derived value of a residual that was not
// memoized.
type derivedKey struct {
	policy     *cedarlang.Policy
	entityType types.EntityType
	hash       uint64
	key        string
}

// derivedEntry is a derived value and the expression it was derived from.
type derivedEntry struct {
	expr  ast.IsNode
	value any
}

// Derived is what derive computes from r, cached under key in e: derive runs
// once per residual value and key while the cache holds it (every time when
// caching is off and r was not memoized). key names what is derived and
// everything it depends on besides r (an effect and a signing key, say).
func (e *Engine) Derived(r Residual, key string, derive func() any) any {
	if r.memo != nil {
		mk := string(r.EntityType) + "\x00" + key
		r.memo.mu.Lock()
		v, ok := r.memo.derived[mk]
		r.memo.mu.Unlock()
		if !ok {
			v = derive()
			r.memo.mu.Lock()
			if r.memo.derived == nil {
				r.memo.derived = map[string]any{}
			}
			r.memo.derived[mk] = v
			r.memo.mu.Unlock()
		}
		return v
	}
	if e.derived == nil {
		return derive()
	}
	dk := derivedKey{policy: r.Policy, entityType: r.EntityType, hash: hashExpr(r.Expr), key: key}
	if ent, ok := e.derived.get(dk); ok && ast.Equal(ast.NewNode(ent.expr), ast.NewNode(r.Expr)) {
		return ent.value
	}
	v := derive()
	e.derived.put(dk, derivedEntry{expr: r.Expr, value: v})
	return v
}
