package residual

import (
	"fmt"
	"strings"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual/wire"
)

// Decision renders an outcome for a caller that handles conditions: a
// concrete decision, or a ConditionsMap of signed conditions (deny conditions
// from forbid residuals, allow conditions from permit residuals). A forbid
// residual that cannot be encoded denies outright; a permit residual that
// cannot be encoded is dropped.
func (c *Codec) Decision(o Outcome) wire.ConditionsAwareDecision {
	if !o.Conditional {
		return concrete(o.Decision, reasonFor(o), strings.Join(o.Errors, "; "))
	}
	errs := append([]string(nil), o.Errors...)
	m := &wire.ConditionsMap{}
	for _, r := range o.Deny {
		cond, err := c.Encode(r, EffectDeny)
		if err != nil {
			errs = append(errs, err.Error())
			return concrete(cedar.Deny, "kcedar: denied by policy "+r.Policy.ID+": its condition cannot be sent to the API server, so it applies unconditionally", strings.Join(errs, "; "))
		}
		m.DenyConditions = append(m.DenyConditions, cond)
	}
	for _, r := range o.Allow {
		if len(m.DenyConditions)+len(m.AllowConditions) >= wire.MaxConditions {
			errs = append(errs, fmt.Sprintf("policy %s: dropped, more than %d conditions", r.Policy.ID, wire.MaxConditions))
			continue
		}
		cond, err := c.Encode(r, EffectAllow)
		if err != nil {
			errs = append(errs, err.Error()+"; the policy cannot allow this request")
			continue
		}
		m.AllowConditions = append(m.AllowConditions, cond)
	}
	if len(m.DenyConditions) > wire.MaxConditions {
		return concrete(cedar.Deny, "kcedar: denied: more deny conditions than the API server takes", strings.Join(errs, "; "))
	}
	if len(m.DenyConditions) == 0 && len(m.AllowConditions) == 0 {
		return concrete(cedar.NoOpinion, "kcedar: no policy applies", strings.Join(errs, "; "))
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: m}
}

func concrete(d cedar.Decision, reason, evalErr string) wire.ConditionsAwareDecision {
	details := &wire.DecisionDetails{Reason: reason, EvaluationError: evalErr}
	switch d {
	case cedar.Allow:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details}
	case cedar.Deny:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details}
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details}
}

// reasonFor explains a concrete outcome, naming the policies and their @reason.
func reasonFor(o Outcome) string {
	switch o.Decision {
	case cedar.Allow:
		return "kcedar: allowed by " + DescribePolicies(o.Policies)
	case cedar.Deny:
		return "kcedar: denied by " + DescribePolicies(o.Policies)
	}
	return "kcedar: no policy applies"
}

// DescribePolicies names policies with their @reason annotations.
func DescribePolicies(ps []*cedar.Policy) string {
	if len(ps) == 0 {
		return "policy"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		if p.Reason != "" {
			parts[i] = "policy " + p.ID + " (" + p.Reason + ")"
		} else {
			parts[i] = "policy " + p.ID
		}
	}
	return strings.Join(parts, ", ")
}
