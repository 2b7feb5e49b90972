package conditions

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// Admission is what admission would know about the request: the operation
// and the objects as JSON (nil when absent).
type Admission struct {
	Operation         string
	Object, OldObject []byte
}

// Report implements Reporter: req decided as Authorize decides it, rendered
// as the offline report of `kcedar authorize` and `kcedar test`: the
// decision a caller that takes conditions gets, the folded one, and each
// condition evaluated against the admission data when adm is given (as the
// callback would).
func (e *Engine) Report(ctx context.Context, req *entities.Request, adm *Admission) engine.Report {
	d := e.Authorize(ctx, req)
	binding := RequestBinding(req)
	dec := e.Encode(d, binding)
	res := engine.Report{WithoutConditions: d.FailureDecision().Type().String(), Audit: engine.AuditReports(d)}
	res.Decision, res.Reason, res.EvaluationError = reportDecision(dec)
	if dec.Type == wire.DecisionTypeConditionsMap {
		res.EvaluationError = d.EvaluationError()
	}
	for _, p := range d.Policies() {
		res.Policies = append(res.Policies, p.ID)
	}
	sort.Strings(res.Policies)
	data := e.admissionDataFor(req, adm)
	if dec.Type != wire.DecisionTypeConditionsMap {
		res.Outcome, res.OutcomeReason, res.OutcomeError = res.Decision, res.Reason, res.EvaluationError
		return res
	}
	res.Conditions = append(e.reportConditions(dec.ConditionsMap.DenyConditions, engine.DecisionDeny, binding, data),
		e.reportConditions(dec.ConditionsMap.AllowConditions, engine.DecisionAllow, binding, data)...)
	if data != nil {
		v := e.EvaluateConditions(ctx, &dec, data)
		res.Outcome, res.OutcomeReason, res.OutcomeError = v.Type().String(), v.Reason(), v.EvaluationError()
	}
	return res
}

// reportDecision is the type, reason and error of an encoded decision.
func reportDecision(dec wire.ConditionsAwareDecision) (decision, reason, evalErr string) {
	t, details := WireDetails(dec)
	if details != nil {
		reason, evalErr = details.Reason, details.EvaluationError
	}
	return t.String(), reason, evalErr
}

// admissionDataFor is what the callback would see of req in admission, or
// nil without adm.
func (e *Engine) admissionDataFor(req *entities.Request, adm *Admission) *AdmissionData {
	if adm == nil {
		return nil
	}
	data := &AdmissionData{
		Operation: adm.Operation,
		APIGroup:  req.APIGroup, APIVersion: req.APIVersion, Resource: req.Resource, Subresource: req.Subresource,
		Namespace: req.Namespace, Name: req.Name,
		User:   &req.User,
		Object: adm.Object, OldObject: adm.OldObject,
	}
	if t := entities.ResolveTarget(e.Schema(), req); t.Resource != nil {
		// The admission request names the resource the target resolved to.
		data.APIGroup, data.Resource, data.Subresource = t.Resource.Key.Group, t.Resource.Key.Resource, t.Resource.Key.Subresource
	}
	return data
}

// reportConditions describes conditions of one effect, each evaluated alone
// against data when it is given. A group condition is described member by
// member, as the policies' own conditions would be.
func (e *Engine) reportConditions(conds []wire.Condition, effect engine.DecisionType, b Binding, data *AdmissionData) []engine.Condition {
	var out []engine.Condition
	for _, c := range conds {
		if c.Type == GroupConditionType {
			out = append(out, e.reportGroup(c, effect, b, data)...)
			continue
		}
		cond := engine.Condition{Effect: effect.String(), ID: c.ID, Description: c.Description}
		cond.EntityType, cond.Expression = splitCondition(c.Condition)
		if data != nil {
			m := &wire.ConditionsMap{}
			if effect == engine.DecisionDeny {
				m.DenyConditions = []wire.Condition{c}
			} else {
				m.AllowConditions = []wire.Condition{c}
			}
			v := e.eval.EvaluateMap(m, data)
			if ee := v.EvaluationError(); ee != "" {
				cond.Error = ee
			} else {
				holds := v.Type() == effect
				cond.Holds = &holds
			}
		}
		out = append(out, cond)
	}
	return out
}

// reportGroup describes each member of a group condition as its own
// condition, evaluated against data when it is given.
func (e *Engine) reportGroup(c wire.Condition, effect engine.DecisionType, b Binding, data *AdmissionData) []engine.Condition {
	d, err := e.codec.decode(c, effect, []Binding{b})
	if err != nil {
		return []engine.Condition{{Effect: effect.String(), ID: c.ID, Description: c.Description, Error: err.Error()}}
	}
	var results []conditionResult
	if data != nil {
		envs := &envCache{e: e.eval, data: data, need: map[types.EntityType][2]*entities.Paths{d.entityType: {d.object, d.oldObject}}}
		results = e.eval.memberResults(pendingCondition{cond: c, d: d}, envs)
	}
	out := make([]engine.Condition, len(d.members))
	for i, m := range d.members {
		cond := engine.Condition{Effect: effect.String(), ID: ConditionID(m.policyID), EntityType: string(d.entityType)}
		if p, found := e.Policies().Get(m.policyID); found {
			cond.Description = Describe(p)
		}
		cond.Expression, _ = engine.ExprText(engine.Instantiate(m.expr, m.context))
		if results != nil {
			if err := results[i].err; err != nil {
				cond.Error = fmt.Sprintf("condition %s: %v", m.policyID, err)
			} else {
				holds := results[i].holds
				cond.Holds = &holds
			}
		}
		out[i] = cond
	}
	return out
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

// Readable is what a condition kcedar wrote checks, for a person to read,
// without verifying it: a policy's expression, or a group's members'
// expressions joined by `||`. Anything else is returned as it is.
func Readable(c wire.Condition) string {
	_, text := splitCondition(c.Condition)
	if c.Type != GroupConditionType {
		return text
	}
	_, members, err := parseGroup(text)
	if err != nil {
		return text
	}
	if readable, err := groupText(members); err == nil {
		return readable
	}
	return text
}
