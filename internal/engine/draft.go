package engine

import (
	"errors"

	"github.com/kcedar/kcedar/internal/wire"
)

// AuthorizerName is how kcedar names itself in the seed draft's
// conditionsChain.
const AuthorizerName = "kcedar"

// EvaluateConditionSets evaluates the seed draft's conditionsChain: in
// order, until one set is not NoOpinion. Only sets kcedar authored are
// evaluated; a set of another authorizer cannot be, so it fails closed.
// Conditions verify only if they were signed for the draft's shape and the
// request of data (its namespace, else the objects', and its operation).
func (e *Evaluator) EvaluateConditionSets(sets []wire.SubjectAccessReviewConditionSet, data *AdmissionData) Decision {
	data = draftData(data)
	for _, set := range sets {
		if v := e.evaluateConditionSet(set, data); v.Type() != DecisionNoOpinion {
			return v
		}
	}
	return NoOpinion(nil).WithReason("kcedar: no condition set decided")
}

// evaluateConditionSet evaluates one set of the draft's chain.
func (e *Evaluator) evaluateConditionSet(set wire.SubjectAccessReviewConditionSet, data *AdmissionData) Decision {
	switch {
	case set.Allowed:
		return Allowed(nil, nil).WithReason(set.AuthorizerName + " allowed")
	case set.Denied:
		return Denied(nil, nil).WithReason(set.AuthorizerName + " denied")
	case set.AuthorizerName != AuthorizerName:
		return Denied(nil, []error{errors.New("foreign condition set")}).WithReason("kcedar: cannot evaluate conditions of authorizer " + set.AuthorizerName)
	}
	m, err := conditionsMapOf(set)
	if err != nil {
		return Denied(nil, []error{err}).WithReason("kcedar: malformed condition set")
	}
	return e.evaluateMap(m, data, true)
}

// conditionsMapOf is a draft condition set as a ConditionsMap.
func conditionsMapOf(set wire.SubjectAccessReviewConditionSet) (*wire.ConditionsMap, error) {
	m := &wire.ConditionsMap{}
	var bad error
	for _, c := range set.Conditions {
		wc := wire.Condition{ID: c.ID, Type: c.Type, Condition: c.Condition, Description: c.Description}
		switch c.Effect {
		case wire.ConditionEffectDeny:
			m.DenyConditions = append(m.DenyConditions, wc)
		case wire.ConditionEffectNoOpinion:
			m.NoOpinionConditions = append(m.NoOpinionConditions, wc)
		case wire.ConditionEffectAllow:
			m.AllowConditions = append(m.AllowConditions, wc)
		default:
			bad = errors.New("condition " + c.ID + " has unknown effect " + string(c.Effect))
		}
	}
	return m, bad
}
