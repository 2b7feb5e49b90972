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

// conditionBudget is a budget for one decision on entityType, or nil when
// decisions are not made for Encode only.
func (e *Engine) conditionBudget(entityType types.EntityType) *conditionBudget {
	if !e.encodedOnly {
		return nil
	}
	key := e.codec.Keys.signing()
	return &conditionBudget{limit: wire.MaxConditions, encodes: func(r policyResult) bool {
		_, err := e.unsignedResidual(Residual{Policy: r.policy, Expr: r.expr, EntityType: entityType, memo: r.memo}, DecisionAllow, key)
		return err == nil
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
