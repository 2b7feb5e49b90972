package engine

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/wire"
)

// conditionBudget counts, while a decision's candidates are evaluated, the
// conditions its encoded answer would carry (EngineOptions.EncodedOnly),
// so that evaluation stops where that answer can no longer change. A nil
// budget counts nothing and never stops anything.
type conditionBudget struct {
	limit       int
	deny, allow int
	// encodes reports whether a permit's residual encodes: Encode drops one
	// that does not, and it takes no room.
	encodes func(policyResult) bool
}

// Encoder tells whether a residual can be sent as a condition: the encoder
// an engine's decisions are made for alone (EngineOptions.EncodedOnly),
// which drops a permit's residual that does not encode.
type Encoder interface {
	// Encodes reports whether r, a residual e left for a policy of effect,
	// encodes as a condition.
	Encodes(e *Engine, r Residual, effect DecisionType) bool
}

// conditionBudget is a budget for one decision on entityType, or nil when
// decisions are not made for one encoder only.
func (e *Engine) conditionBudget(entityType types.EntityType) *conditionBudget {
	if e.encodedOnly == nil {
		return nil
	}
	return &conditionBudget{limit: wire.MaxConditions, encodes: func(r policyResult) bool {
		return e.encodedOnly.Encodes(e, Residual{Policy: r.policy, Expr: r.expr, EntityType: entityType, memo: r.memo}, DecisionAllow)
	}}
}

// forbidOverflows counts r, a forbid's result, and reports whether the deny
// conditions now exceed the limit: Encode then answers Deny, whatever the
// other policies say.
func (b *conditionBudget) forbidOverflows(r policyResult) bool {
	if b == nil || r.kind != remaining {
		return false
	}
	b.deny++
	return b.deny > b.limit
}

// full reports whether Encode would drop any further allow condition.
func (b *conditionBudget) full() bool { return b != nil && b.deny+b.allow >= b.limit }

// takeAllow counts r, a permit's residual, if it encodes.
func (b *conditionBudget) takeAllow(r policyResult) {
	if b != nil && b.encodes(r) {
		b.allow++
	}
}
