package conditions

import (
	"fmt"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/wire"
)

// Encode renders d for a caller that handles conditions: a concrete decision
// as it is, a Conditional one as a ConditionsMap of signed conditions (deny
// conditions from forbid residuals, allow conditions from permit residuals).
// A forbid residual that cannot be encoded denies outright; a permit residual
// that cannot be encoded is dropped (it can then only fail to allow). The
// result always satisfies upstream's validation of a ConditionsAwareDecision.
// The conditions are signed for binding b: they verify only for that request
// (binding.go).
func (e *Engine) Encode(d engine.Decision, b Binding) wire.ConditionsAwareDecision {
	if !d.IsConditional() {
		return WireDecision(d)
	}
	errs := append([]error(nil), d.Errors()...)
	if len(d.DenyConditions()) > wire.MaxConditions {
		return WireDecision(engine.Denied(nil, errs).WithReason("kcedar: denied: more deny conditions than the API server takes"))
	}
	m := &wire.ConditionsMap{}
	s := newSigner(e.codec.Keys.signing(), b)
	for _, r := range d.DenyConditions() {
		cond, err := e.encodeResidual(r, engine.DecisionDeny, s)
		if err != nil {
			errs = append(errs, err)
			return WireDecision(engine.Denied(nil, errs).WithReason("kcedar: denied by policy " + r.Policy.ID + ": its condition cannot be sent to the API server, so it applies unconditionally"))
		}
		m.DenyConditions = append(m.DenyConditions, cond)
	}
	for _, r := range d.AllowConditions() {
		if len(m.DenyConditions)+len(m.AllowConditions) >= wire.MaxConditions {
			errs = append(errs, &engine.PolicyError{PolicyID: r.Policy.ID, Err: fmt.Errorf("dropped, more than %d conditions", wire.MaxConditions)})
			continue
		}
		cond, err := e.encodeResidual(r, engine.DecisionAllow, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w; the policy cannot allow this request", err))
			continue
		}
		m.AllowConditions = append(m.AllowConditions, cond)
	}
	if len(m.DenyConditions) == 0 && len(m.AllowConditions) == 0 {
		return WireDecision(engine.NoOpinion(errs))
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: m}
}

// WireDecision renders a concrete decision (a Conditional one folded by
// FailureDecision) as a ConditionsAwareDecision.
func WireDecision(d engine.Decision) wire.ConditionsAwareDecision {
	d = d.FailureDecision()
	details := &wire.DecisionDetails{Reason: d.Reason(), EvaluationError: d.EvaluationError()}
	switch d.Type() {
	case engine.DecisionAllow:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details}
	case engine.DecisionNoOpinion:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details}
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details}
}

// WireDetails is the type and details of an encoded decision: Allow,
// Deny or NoOpinion with their details, else (a ConditionsMap)
// DecisionConditional without.
func WireDetails(d wire.ConditionsAwareDecision) (engine.DecisionType, *wire.DecisionDetails) {
	switch d.Type {
	case wire.DecisionTypeAllow:
		return engine.DecisionAllow, d.Allow
	case wire.DecisionTypeDeny:
		return engine.DecisionDeny, d.Deny
	case wire.DecisionTypeNoOpinion:
		return engine.DecisionNoOpinion, d.NoOpinion
	}
	return engine.DecisionConditional, nil
}
