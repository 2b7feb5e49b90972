package engine

import (
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/wire"
)

// Report is an offline answer, as `kcedar authorize` prints it and `kcedar
// test` checks it.
type Report struct {
	// Decision is Allow, Deny, NoOpinion or Conditional, as a caller that
	// takes conditions (KEP-5681) gets it.
	Decision        string   `json:"decision"`
	Policies        []string `json:"policies,omitempty"`
	Reason          string   `json:"reason,omitempty"`
	EvaluationError string   `json:"evaluationError,omitempty"`
	// WithoutConditions is the answer of a caller that cannot take conditions
	// (a conditional answer folded: Deny if a deny condition exists, else
	// NoOpinion), as /v1/authorize gives it without --admission-enforcement.
	WithoutConditions string `json:"withoutConditions"`
	// Conditions of a Conditional decision, each evaluated against the
	// admission data when it was given.
	Conditions []Condition `json:"conditions,omitempty"`
	// Outcome is the decision after admission: the Conditional decision's
	// conditions evaluated against the objects (as the callback would), or a
	// concrete decision as it is. Empty for a conditional decision without
	// admission data.
	Outcome        string                        `json:"outcome,omitempty"`
	OutcomeReason  string                        `json:"outcomeReason,omitempty"`
	OutcomeError   string                        `json:"outcomeError,omitempty"`
	ConditionsWire *wire.ConditionsAwareDecision `json:"-"`
	// Audit are the audit policies that would have changed Decision.
	Audit []AuditReport `json:"audit,omitempty"`
}

// AuditReport is one audit finding (an audit policy that would have changed
// the decision) as the decision log, the metrics and the offline report
// show it. It is never part of an answer to the API server.
type AuditReport struct {
	Policy string `json:"policy"`
	Effect string `json:"effect"` // permit or forbid
	// Would is the decision with the policy enforced: deny, allow or
	// conditional.
	Would string `json:"would"`
	// Residual is the policy's condition of a would-be-conditional finding
	// (Cedar text; never signed, never sent).
	Residual string `json:"residual,omitempty"`
}

// AuditReports renders d's audit findings, sorted by policy id.
func AuditReports(d Decision) []AuditReport {
	var out []AuditReport
	for _, f := range d.AuditFindings() {
		r := AuditReport{Policy: f.Policy().ID, Effect: "permit", Would: strings.ToLower(f.Would().Type().String())}
		if f.Policy().Effect == types.Forbid {
			r.Effect = "forbid"
		}
		if res, ok := f.Residual(); ok {
			if text, err := ExprText(res.Expr); err == nil {
				r.Residual = text
			}
		}
		out = append(out, r)
	}
	return out
}

// Condition is one condition of a conditional decision.
type Condition struct {
	Effect      string `json:"effect"` // Deny or Allow
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	EntityType  string `json:"entityType"`
	Expression  string `json:"expression"`
	// Holds is the condition's value against the admission data (nil when
	// no data was given or it failed to evaluate: see Error).
	Holds *bool  `json:"holds,omitempty"`
	Error string `json:"error,omitempty"`
}

// String renders a decision for people. Every value it quotes (policy
// ids, reasons, conditions, errors) is escaped for a terminal
// (safetext.Fprintf): they come from policies and requests.
func (d Report) String() string {
	var b strings.Builder
	safetext.Fprintf(&b, "decision: %s\n", d.Decision)
	if len(d.Policies) > 0 {
		safetext.Fprintf(&b, "policies: %s\n", strings.Join(d.Policies, ", "))
	}
	if d.Reason != "" {
		safetext.Fprintf(&b, "reason: %s\n", d.Reason)
	}
	if d.EvaluationError != "" {
		safetext.Fprintf(&b, "evaluation error: %s\n", d.EvaluationError)
	}
	for _, a := range d.Audit {
		safetext.Fprintf(&b, "audit: %s %s would %s\n", a.Effect, a.Policy, a.Would)
		if a.Residual != "" {
			safetext.Fprintf(&b, "    if %s\n", a.Residual)
		}
	}
	if d.Decision == "Conditional" {
		safetext.Fprintf(&b, "without conditional authorization: %s\n", d.WithoutConditions)
		for _, c := range d.Conditions {
			safetext.Fprintf(&b, "condition %s (%s", c.ID, strings.ToLower(c.Effect))
			if c.Description != "" && c.Description != c.ID {
				safetext.Fprintf(&b, ", %s", c.Description)
			}
			safetext.Fprintf(&b, ") on %s:\n    %s\n", c.EntityType, c.Expression)
			switch {
			case c.Error != "":
				safetext.Fprintf(&b, "    -> error: %s\n", c.Error)
			case c.Holds != nil:
				safetext.Fprintf(&b, "    -> %t\n", *c.Holds)
			}
		}
		if d.Outcome != "" {
			safetext.Fprintf(&b, "outcome in admission: %s", d.Outcome)
			if d.OutcomeReason != "" {
				safetext.Fprintf(&b, " (%s)", d.OutcomeReason)
			}
			b.WriteString("\n")
			if d.OutcomeError != "" {
				safetext.Fprintf(&b, "outcome evaluation error: %s\n", d.OutcomeError)
			}
		} else {
			b.WriteString("outcome in admission: depends on the objects (give --object / --old-object)\n")
		}
	}
	return b.String()
}
