package offline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/wire"
)

// Decider answers one request offline the way `kcedar serve` does: through
// the same engine.Engine (authorization, encoding of conditions, and the
// callback's evaluation of them).
type Decider struct {
	engine *engine.Engine
}

// NewDecider signs conditions with a random key (they never leave the process).
func NewDecider(s *schemagen.Schema, ps *cedarlang.PolicySet) *Decider {
	return &Decider{engine: engine.NewEngine(s, ps, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})}
}

// Admission is what admission would know about the request: the operation
// and the objects as JSON (nil when absent).
type Admission struct {
	Operation         string
	Object, OldObject []byte
}

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

// Decide answers req; adm may be nil.
func (d *Decider) Decide(req *entities.Request, adm *Admission) Report {
	out := d.engine.Authorize(req)
	dec := d.engine.Encode(out)
	res := Report{WithoutConditions: out.FailureDecision().Type().String()}
	details := func(dd *wire.DecisionDetails) {
		if dd != nil {
			res.Reason, res.EvaluationError = dd.Reason, dd.EvaluationError
		}
	}
	switch dec.Type {
	case wire.DecisionTypeAllow:
		res.Decision = engine.DecisionAllow.String()
		details(dec.Allow)
	case wire.DecisionTypeDeny:
		res.Decision = engine.DecisionDeny.String()
		details(dec.Deny)
	case wire.DecisionTypeNoOpinion:
		res.Decision = engine.DecisionNoOpinion.String()
		details(dec.NoOpinion)
	default:
		res.Decision = engine.DecisionConditional.String()
		res.EvaluationError = out.EvaluationError()
	}
	for _, p := range out.Policies() {
		res.Policies = append(res.Policies, p.ID)
	}
	sort.Strings(res.Policies)
	var data *engine.AdmissionData
	if adm != nil {
		data = &engine.AdmissionData{
			Operation: adm.Operation,
			APIGroup:  req.APIGroup, APIVersion: req.APIVersion, Resource: req.Resource, Subresource: req.Subresource,
			Namespace: req.Namespace, Name: req.Name,
			User:   &req.User,
			Object: adm.Object, OldObject: adm.OldObject,
		}
		if t := entities.ResolveTarget(d.engine.Schema(), req); t.Resource != nil {
			// The admission request names the resource the target resolved to.
			data.APIGroup, data.Resource, data.Subresource = t.Resource.Key.Group, t.Resource.Key.Resource, t.Resource.Key.Subresource
		}
	}
	if dec.Type == wire.DecisionTypeConditionsMap {
		add := func(conds []wire.Condition, effect string) {
			for _, c := range conds {
				cond := Condition{Effect: effect, ID: c.ID, Description: c.Description}
				cond.EntityType, cond.Expression = splitCondition(c.Condition)
				if data != nil {
					m := &wire.ConditionsMap{}
					if effect == "Deny" {
						m.DenyConditions = []wire.Condition{c}
					} else {
						m.AllowConditions = []wire.Condition{c}
					}
					v := d.engine.Evaluator().EvaluateMap(m, data)
					if ee := v.EvaluationError(); ee != "" {
						cond.Error = ee
					} else {
						holds := (effect == "Deny" && v.IsDenied()) || (effect == "Allow" && v.IsAllowed())
						cond.Holds = &holds
					}
				}
				res.Conditions = append(res.Conditions, cond)
			}
		}
		add(dec.ConditionsMap.DenyConditions, "Deny")
		add(dec.ConditionsMap.AllowConditions, "Allow")
		if data != nil {
			v := d.engine.EvaluateConditions(&dec, data)
			res.Outcome, res.OutcomeReason, res.OutcomeError = v.Type().String(), v.Reason(), v.EvaluationError()
		}
	} else {
		res.Outcome, res.OutcomeReason, res.OutcomeError = res.Decision, res.Reason, res.EvaluationError
	}
	return res
}

// splitCondition extracts the entity type and the Cedar expression from a
// condition kcedar wrote ("<prefix>;<key>;<mac>;<entity type>;<expression>").
func splitCondition(s string) (string, string) {
	parts := strings.SplitN(s, ";", 5)
	if len(parts) < 5 {
		return "", s
	}
	return parts[3], parts[4]
}

// DefaultOperation is the admission operation a verb arrives as.
func DefaultOperation(verb, subresource string) string {
	switch subresource {
	case "exec", "attach", "portforward", "proxy":
		return "CONNECT"
	}
	switch verb {
	case "create":
		return "CREATE"
	case "update", "patch":
		return "UPDATE"
	case "delete", "deletecollection":
		return "DELETE"
	}
	return ""
}

// String renders a decision for people.
func (d Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s\n", d.Decision)
	if len(d.Policies) > 0 {
		fmt.Fprintf(&b, "policies: %s\n", strings.Join(d.Policies, ", "))
	}
	if d.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	}
	if d.EvaluationError != "" {
		fmt.Fprintf(&b, "evaluation error: %s\n", d.EvaluationError)
	}
	if d.Decision == "Conditional" {
		fmt.Fprintf(&b, "without conditional authorization: %s\n", d.WithoutConditions)
		for _, c := range d.Conditions {
			fmt.Fprintf(&b, "condition %s (%s", c.ID, strings.ToLower(c.Effect))
			if c.Description != "" && c.Description != c.ID {
				fmt.Fprintf(&b, ", %s", c.Description)
			}
			fmt.Fprintf(&b, ") on %s:\n    %s\n", c.EntityType, c.Expression)
			switch {
			case c.Error != "":
				fmt.Fprintf(&b, "    -> error: %s\n", c.Error)
			case c.Holds != nil:
				fmt.Fprintf(&b, "    -> %t\n", *c.Holds)
			}
		}
		if d.Outcome != "" {
			fmt.Fprintf(&b, "outcome in admission: %s", d.Outcome)
			if d.OutcomeReason != "" {
				fmt.Fprintf(&b, " (%s)", d.OutcomeReason)
			}
			b.WriteString("\n")
			if d.OutcomeError != "" {
				fmt.Fprintf(&b, "outcome evaluation error: %s\n", d.OutcomeError)
			}
		} else {
			b.WriteString("outcome in admission: depends on the objects (give --object / --old-object)\n")
		}
	}
	return b.String()
}
