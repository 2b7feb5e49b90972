package upstream

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/wire"
)

// Unconditional is d as an unconditional authorizer answers: a Conditional
// decision folded (Decision.FailureDecision) and its reason. A policy's
// evaluation error is part of the decision (an erroring forbid denies, an
// erroring permit allows nothing), not a failure of the authorizer, so it is
// not returned: k8s.io/apiserver answers 500 for a decision that carries an
// error, and shows the error to the client, where kcedar's webhook gets a
// 403 (kube-apiserver does not act on a review's evaluationError).
func Unconditional(d engine.Decision) (authorizer.Decision, string, error) {
	d = d.FailureDecision()
	switch d.Type() {
	case engine.DecisionAllow:
		return authorizer.DecisionAllow, d.Reason(), nil
	case engine.DecisionNoOpinion:
		return authorizer.DecisionNoOpinion, noOpinionReason(d.Reason()), nil
	}
	return authorizer.DecisionDeny, d.Reason(), nil
}

// Concrete is an encoded decision Encode could not keep conditional (its
// type is Allow, Deny or NoOpinion) as an unconditional authorizer answers
// it: its type and reason; its evaluation error is not the authorizer's
// (see Unconditional).
func Concrete(w wire.ConditionsAwareDecision) (authorizer.Decision, string) {
	t, details := conditions.WireDetails(w)
	var reason string
	if details != nil {
		reason = details.Reason
	}
	switch t {
	case engine.DecisionAllow:
		return authorizer.DecisionAllow, reason
	case engine.DecisionNoOpinion:
		return authorizer.DecisionNoOpinion, noOpinionReason(reason)
	}
	return authorizer.DecisionDeny, reason
}

// Evaluated is d as the answer of EvaluateConditions (and of
// ConditionsAwareAuthorize for a concrete decision): Unconditional, with
// the policies' evaluation errors in the reason (ReasonWithError).
func Evaluated(d engine.Decision) (authorizer.Decision, string, error) {
	t, reason, err := Unconditional(d)
	return t, ReasonWithError(reason, d.FailureDecision().EvaluationError()), err
}

// ReasonWithError is reason with a policy's evaluation error appended, for
// a caller of conditional authorization. k8s.io/apiserver (Kubernetes 1.38)
// takes a decision's evaluationError for a failure of the authorizer and
// answers 500; for kcedar an error is part of the decision (an erroring
// forbid denies, an erroring permit allows nothing), so the client gets the
// 403 of the decision, with the error in its message.
func ReasonWithError(reason, evaluationError string) string {
	if evaluationError == "" {
		return reason
	}
	return reason + " (evaluation error: " + evaluationError + ")"
}

// reasonPrefix starts every reason kcedar gives.
const reasonPrefix = engine.AuthorizerName + ": "

// noOpinionReason is a NoOpinion's reason without kcedar's prefix:
// k8s.io/apiserver's union authorizer prefixes a NoOpinion's reason with the
// authorizer's name (an Allow's or a Deny's it passes on as it is), so a
// reason reads "kcedar: " once, as the webhook's does.
func noOpinionReason(reason string) string { return strings.TrimPrefix(reason, reasonPrefix) }

// ConditionsAware is an encoded decision (conditions.Engine.Encode) as
// upstream's ConditionsAwareDecision: a concrete one with its reason (its
// evaluation errors are not the authorizer's: see Unconditional), a
// ConditionsMap of GenericConditions carrying kcedar's signed condition text
// (evaluated by kcedar's EvaluateConditions, not in place).
func ConditionsAware(w wire.ConditionsAwareDecision) authorizer.ConditionsAwareDecision {
	t, details := conditions.WireDetails(w)
	var reason string
	if details != nil {
		reason = ReasonWithError(details.Reason, details.EvaluationError)
	}
	switch t {
	case engine.DecisionAllow:
		return authorizer.ConditionsAwareDecisionAllow(reason, nil)
	case engine.DecisionNoOpinion:
		return authorizer.ConditionsAwareDecisionNoOpinion(noOpinionReason(reason), nil)
	case engine.DecisionDeny:
		return authorizer.ConditionsAwareDecisionDeny(reason, nil)
	}
	m := w.ConditionsMap
	return authorizer.ConditionsAwareDecisionConditionsMap(generic(m.DenyConditions), generic(m.NoOpinionConditions), generic(m.AllowConditions))
}

// generic is conds as upstream conditions.
func generic(conds []wire.Condition) []authorizer.Condition {
	out := make([]authorizer.Condition, len(conds))
	for i, c := range conds {
		out[i] = authorizer.GenericCondition{ID: c.ID, Condition: c.Condition, Type: c.Type, Description: c.Description}
	}
	return out
}

// Wire is an upstream ConditionsAwareDecision in the callback's wire shape,
// unions included, so kcedar evaluates it exactly as it evaluates a
// callback's request.decision.
func Wire(d authorizer.ConditionsAwareDecision) wire.ConditionsAwareDecision {
	details := func() *wire.DecisionDetails {
		dd := &wire.DecisionDetails{Reason: d.Reason()}
		if err := d.Error(); err != nil {
			dd.EvaluationError = err.Error()
		}
		return dd
	}
	switch {
	case d.IsAllow():
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details()}
	case d.IsNoOpinion():
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details()}
	case d.IsConditionsMap():
		m := d.ConditionsMap()
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &wire.ConditionsMap{
			DenyConditions: wireConditions(m.DenyConditions()), NoOpinionConditions: wireConditions(m.NoOpinionConditions()),
			AllowConditions: wireConditions(m.AllowConditions()),
		}}
	case d.IsUnion():
		var members []wire.UnionMember
		for name, sub := range d.UnionedDecisions() {
			members = append(members, wire.UnionMember{AuthorizerName: name, Decision: Wire(sub)})
		}
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeUnion, Union: members}
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details()}
}

// wireConditions is a sequence of upstream conditions in the wire shape.
func wireConditions(seq func(func(authorizer.Condition) bool)) []wire.Condition {
	var out []wire.Condition
	for c := range seq {
		out = append(out, wire.Condition{ID: c.GetID(), Type: c.GetType(), Condition: c.GetCondition(), Description: c.GetDescription()})
	}
	return out
}

// FromWire is a callback's decision as upstream's ConditionsAwareDecision,
// unions included; an error for a decision upstream would not build (an
// unknown type, a ConditionsMap without conditions).
func FromWire(w *wire.ConditionsAwareDecision) (authorizer.ConditionsAwareDecision, error) {
	if w == nil {
		return authorizer.ConditionsAwareDecision{}, errors.New("request.decision is missing")
	}
	parts := func(d *wire.DecisionDetails) (string, error) {
		if d == nil {
			return "", nil
		}
		if d.EvaluationError != "" {
			return d.Reason, errors.New(d.EvaluationError)
		}
		return d.Reason, nil
	}
	switch w.Type {
	case wire.DecisionTypeAllow:
		return authorizer.ConditionsAwareDecisionAllow(parts(w.Allow)), nil
	case wire.DecisionTypeDeny:
		return authorizer.ConditionsAwareDecisionDeny(parts(w.Deny)), nil
	case wire.DecisionTypeNoOpinion:
		return authorizer.ConditionsAwareDecisionNoOpinion(parts(w.NoOpinion)), nil
	case wire.DecisionTypeConditionsMap:
		m := w.ConditionsMap
		if m == nil {
			return authorizer.ConditionsAwareDecision{}, errors.New("type ConditionsMap without conditionsMap")
		}
		switch total := len(m.DenyConditions) + len(m.NoOpinionConditions) + len(m.AllowConditions); {
		case total == 0:
			return authorizer.ConditionsAwareDecision{}, errors.New("empty conditionsMap")
		case total > wire.MaxConditions:
			return authorizer.ConditionsAwareDecision{}, fmt.Errorf("%d conditions, more than %d", total, wire.MaxConditions)
		}
		d := authorizer.ConditionsAwareDecisionConditionsMap(generic(m.DenyConditions), generic(m.NoOpinionConditions), generic(m.AllowConditions))
		if err := d.Error(); err != nil {
			// Upstream refused the map (duplicate ids, ids or types that
			// are not label keys): it never sends such a decision.
			return d, fmt.Errorf("conditionsMap: %s: %w", d.Reason(), err)
		}
		// Possibly folded as upstream folds it (only noOpinion conditions
		// are a NoOpinion, whatever they say).
		return d, nil
	case wire.DecisionTypeUnion:
		var u authorizer.ConditionsAwareDecisionUnion
		for _, m := range w.Union {
			sub, err := FromWire(&m.Decision)
			if err != nil {
				return sub, err
			}
			u.Add(m.AuthorizerName, sub)
		}
		return u.ToDecision(), nil
	}
	return authorizer.ConditionsAwareDecision{}, fmt.Errorf("unknown decision type %q", w.Type)
}
