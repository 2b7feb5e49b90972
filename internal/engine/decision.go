package engine

import (
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// AuthorizerName is how kcedar names itself: the prefix of its reasons
// ("kcedar: ..."), as kcedar manifests names its authorizer.
const AuthorizerName = "kcedar"

// DecisionType is what a Decision says. The first three are
// k8s.io/apiserver's authorizer.Decision values in the same order, so the
// zero value is Deny; Conditional is KEP-5681's conditional decision.
type DecisionType int

const (
	DecisionDeny DecisionType = iota
	DecisionAllow
	DecisionNoOpinion
	DecisionConditional
)

func (t DecisionType) String() string {
	switch t {
	case DecisionAllow:
		return "Allow"
	case DecisionNoOpinion:
		return "NoOpinion"
	case DecisionConditional:
		return "Conditional"
	}
	return "Deny"
}

// Decision is kcedar's one decision model, shaped like KEP-5681's
// ConditionsAwareDecision: Allow, Deny, NoOpinion, or Conditional (deny and
// allow conditions that admission data decides). It is immutable and built
// only by the constructors below; its zero value is a Deny (fail closed).
type Decision struct {
	typ      DecisionType
	policies []*cedarlang.Policy
	deny     []Residual
	allow    []Residual
	errs     []error
	reason   string
	// audit: what audit policies would have changed (audit.go); never
	// rendered to the API server.
	audit []AuditFinding
}

// PolicyError is a policy (or condition) that failed to evaluate.
type PolicyError struct {
	PolicyID string
	Err      error
}

func (e *PolicyError) Error() string { return "policy " + e.PolicyID + ": " + e.Err.Error() }
func (e *PolicyError) Unwrap() error { return e.Err }

// Allowed is an Allow by policies.
func Allowed(policies []*cedarlang.Policy, errs []error) Decision {
	return Decision{typ: DecisionAllow, policies: uniquePolicies(policies), errs: uniqueErrors(errs)}
}

// Denied is a Deny by policies (satisfied forbids, or forbids that failed to
// evaluate).
func Denied(policies []*cedarlang.Policy, errs []error) Decision {
	return Decision{typ: DecisionDeny, policies: uniquePolicies(policies), errs: uniqueErrors(errs)}
}

// NoOpinion is the answer when no policy applies.
func NoOpinion(errs []error) Decision {
	return Decision{typ: DecisionNoOpinion, errs: uniqueErrors(errs)}
}

// Conditional is a decision that admission data decides, by KEP-5681's rules:
// any deny condition true or erroring -> Deny; else any allow condition true
// -> Allow; else NoOpinion. Without conditions it is NoOpinion.
func Conditional(deny, allow []Residual, errs []error) Decision {
	if len(deny) == 0 && len(allow) == 0 {
		return NoOpinion(errs)
	}
	return Decision{typ: DecisionConditional, deny: slices.Clip(deny), allow: slices.Clip(allow), errs: uniqueErrors(errs)}
}

// WithReason is d with a reason to show instead of the one derived from its
// policies.
func (d Decision) WithReason(reason string) Decision {
	d.reason = reason
	return d
}

// withAudit is d carrying audit findings.
func (d Decision) withAudit(findings []AuditFinding) Decision {
	d.audit = findings
	return d
}

// AuditFindings are the audit policies that would have changed this
// decision, sorted by policy id (a shared slice: do not modify it). They
// are for the decision log, the metrics and the offline report only.
func (d Decision) AuditFindings() []AuditFinding { return d.audit }

// Type is what the decision says.
func (d Decision) Type() DecisionType { return d.typ }

// IsAllowed, IsDenied and IsConditional test the type.
func (d Decision) IsAllowed() bool     { return d.typ == DecisionAllow }
func (d Decision) IsDenied() bool      { return d.typ == DecisionDeny }
func (d Decision) IsConditional() bool { return d.typ == DecisionConditional }

// Policies are the policies that decided an Allow or a Deny, sorted by id;
// for a conditional decision, the policies of its conditions. The slice is
// shared: do not modify it.
func (d Decision) Policies() []*cedarlang.Policy {
	if d.typ != DecisionConditional {
		return d.policies
	}
	ps := make([]*cedarlang.Policy, 0, len(d.deny)+len(d.allow))
	for _, r := range d.deny {
		ps = append(ps, r.Policy)
	}
	for _, r := range d.allow {
		ps = append(ps, r.Policy)
	}
	return uniquePolicies(ps)
}

// DenyConditions and AllowConditions are a conditional decision's residuals
// (shared slices: do not modify them).
func (d Decision) DenyConditions() []Residual  { return d.deny }
func (d Decision) AllowConditions() []Residual { return d.allow }

// Errors are the evaluation errors met while deciding, sorted and unique.
func (d Decision) Errors() []error { return d.errs }

// EvaluationError joins the errors for a SubjectAccessReview's
// status.evaluationError.
func (d Decision) EvaluationError() string {
	if len(d.errs) == 0 {
		return ""
	}
	s := make([]string, len(d.errs))
	for i, e := range d.errs {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// Reason explains the decision to people, naming its policies and their
// @reason annotations.
func (d Decision) Reason() string {
	if d.reason != "" {
		return d.reason
	}
	switch d.typ {
	case DecisionAllow:
		return "kcedar: allowed by " + DescribePolicies(d.policies)
	case DecisionNoOpinion:
		return "kcedar: no policy applies"
	case DecisionConditional:
		return "kcedar: depends on the conditions of " + DescribePolicies(d.Policies())
	}
	if len(d.policies) == 0 {
		return "kcedar: denied (no decision was made, so kcedar fails closed)"
	}
	return "kcedar: denied by " + DescribePolicies(d.policies)
}

// FailureDecision folds a conditional decision for a caller that cannot
// evaluate conditions (KEP-5681): Deny if any deny condition exists, else
// NoOpinion. Other decisions are returned as they are.
func (d Decision) FailureDecision() Decision {
	if d.typ != DecisionConditional {
		return d
	}
	if len(d.deny) > 0 {
		ps := make([]*cedarlang.Policy, len(d.deny))
		for i, r := range d.deny {
			ps[i] = r.Policy
		}
		return Denied(ps, d.errs).withAudit(d.audit)
	}
	return NoOpinion(d.errs).withAudit(d.audit)
}

// DescribePolicies names policies with their @reason annotations.
func DescribePolicies(ps []*cedarlang.Policy) string {
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

func uniquePolicies(ps []*cedarlang.Policy) []*cedarlang.Policy {
	if len(ps) == 0 {
		return nil
	}
	ps = slices.Clone(ps)
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	return slices.Clip(slices.CompactFunc(ps, func(a, b *cedarlang.Policy) bool { return a.ID == b.ID }))
}

func uniqueErrors(errs []error) []error {
	if len(errs) == 0 {
		return nil
	}
	errs = slices.Clone(errs)
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return slices.Clip(slices.CompactFunc(errs, func(a, b error) bool { return a.Error() == b.Error() }))
}

// errorf is an evaluation error without a policy.
func errorf(msg string) error { return errors.New(msg) }
