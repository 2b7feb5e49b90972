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
// (binding.go). Residuals of one form are sent as one group condition
// (group.go); a policy alone in its form keeps a condition of its own.
func (e *Engine) Encode(d engine.Decision, b Binding) wire.ConditionsAwareDecision {
	if !d.IsConditional() {
		return WireDecision(d)
	}
	errs := append([]error(nil), d.Errors()...)
	if len(d.DenyConditions()) > wire.MaxConditions {
		return WireDecision(engine.Denied(nil, errs).WithReason("kcedar: denied: more deny conditions than the API server takes"))
	}
	key := e.codec.Keys.signing()
	for _, r := range d.DenyConditions() {
		if _, err := e.codec.unsigned(e.Engine, r, engine.DecisionDeny, key); err != nil {
			errs = append(errs, err)
			return WireDecision(engine.Denied(nil, errs).WithReason("kcedar: denied by policy " + r.Policy.ID + ": its condition cannot be sent to the API server, so it applies unconditionally"))
		}
	}
	var allow []engine.Residual
	for _, r := range d.AllowConditions() {
		if len(d.DenyConditions())+len(allow) >= wire.MaxConditions {
			errs = append(errs, &engine.PolicyError{PolicyID: r.Policy.ID, Err: fmt.Errorf("dropped, more than %d conditions", wire.MaxConditions)})
			continue
		}
		if _, err := e.codec.unsigned(e.Engine, r, engine.DecisionAllow, key); err != nil {
			errs = append(errs, fmt.Errorf("%w; the policy cannot allow this request", err))
			continue
		}
		allow = append(allow, r)
	}
	if len(d.DenyConditions()) == 0 && len(allow) == 0 {
		return WireDecision(engine.NoOpinion(errs))
	}
	return e.signed(d.DenyConditions(), allow, newSigner(key, b), errs)
}

// signed is the ConditionsMap of the deny and allow residuals of a
// decision, each known to encode with s's key, signed by s; residuals of
// one form are grouped (group.go).
func (e *Engine) signed(deny, allow []engine.Residual, s *signer, errs []error) wire.ConditionsAwareDecision {
	m := &wire.ConditionsMap{}
	var err error
	if m.DenyConditions, err = e.signAll(deny, engine.DecisionDeny, s); err != nil {
		return WireDecision(engine.Denied(nil, append(errs, err)).WithReason("kcedar: denied: the deny conditions cannot be sent to the API server"))
	}
	if m.AllowConditions, err = e.signAll(allow, engine.DecisionAllow, s); err != nil {
		return WireDecision(engine.NoOpinion(append(errs, err)))
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
