package upstream

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// kcedar sits in kube-apiserver's authorizer chain (its
// AuthorizationConfiguration), usually before RBAC, as kcedar manifests
// writes it: kcedar's Allow or Deny is final, and on its NoOpinion RBAC
// decides. The offline tools answer for that chain (Chain): kcedar's answer
// as kcedar serve gives it in its mode (Serve), then RBAC's, composed by
// k8s.io/apiserver's own union (ConditionsAwareDecisionUnion), conditions
// included. RBAC is the Cedar permits kcedar rbac convert writes, decided by
// an engine of their own: RBAC only grants, so its converted policies are
// permits.

// ServeMode is how kcedar serve answers a decision left conditional on what
// admission sees: what kube-apiserver's authorizer chain receives.
type ServeMode string

const (
	// ServeModeNone: no conditional authorization (kcedar serve's default):
	// a conditional decision is folded, Deny if a deny condition remains,
	// else NoOpinion.
	ServeModeNone ServeMode = "none"
	// ServeModeAdmissionEnforcement: kcedar serve --admission-enforcement
	// (Kubernetes 1.37): a conditional allow on a request kcedar's admission
	// webhook sees is answered Allow, and the webhook checks its conditions
	// on the object; anything else is folded.
	ServeModeAdmissionEnforcement ServeMode = "admission-enforcement"
	// ServeModeConditionsReview: conditional authorization (KEP-5681,
	// Kubernetes 1.38 with the ConditionalAuthorization gate and the
	// webhook's conditionsReview): the conditions go to the API server,
	// which calls kcedar back in admission to evaluate them.
	ServeModeConditionsReview ServeMode = "conditions-review"
)

// ServeModes are the modes, as flags name them.
var ServeModes = []ServeMode{ServeModeNone, ServeModeAdmissionEnforcement, ServeModeConditionsReview}

// ParseServeMode reads a mode as flags name it.
func ParseServeMode(s string) (ServeMode, error) {
	for _, m := range ServeModes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(ServeModes))
	for i, m := range ServeModes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("mode %q: give one of %s", s, strings.Join(names, ", "))
}

// Describe is the mode as the outputs name it: what the server runs.
func (m ServeMode) Describe() string {
	switch m {
	case ServeModeAdmissionEnforcement:
		return "kcedar serve --admission-enforcement (Kubernetes 1.37: a conditional allow is answered Allow, and kcedar's admission webhook checks its conditions)"
	case ServeModeConditionsReview:
		return "conditional authorization (Kubernetes 1.38, KEP-5681: the API server takes the conditions and calls kcedar back in admission)"
	}
	return "no conditional authorization (a conditional decision is folded: Deny if a deny condition remains, else NoOpinion)"
}

// Served is kcedar's answer to kube-apiserver for one request, as kcedar
// serve gives it in a mode.
type Served struct {
	Mode ServeMode
	// Decision is the engine's decision, conditions included.
	Decision engine.Decision
	// Answer is what kube-apiserver receives: a concrete decision, or, in
	// conditions-review, a ConditionsMap of signed conditions.
	Answer wire.ConditionsAwareDecision
	// Enforced: Answer is an Allow whose allow conditions kcedar's
	// admission webhook checks (admission-enforcement).
	Enforced bool
}

// Type is the answer's type: Allow, Deny, NoOpinion or Conditional.
func (s Served) Type() engine.DecisionType {
	t, _ := conditions.WireDetails(s.Answer)
	return t
}

// Serve decides req with e and answers as kcedar serve does in mode. The
// group version of req is taken to be served by kube-apiserver itself (not
// proxied to an aggregated API server, whose requests kcedar's admission
// webhook never sees).
func Serve(ctx context.Context, e *conditions.Engine, req *entities.Request, mode ServeMode) Served {
	d := e.Authorize(ctx, req)
	s := Served{Mode: mode, Decision: d, Answer: conditions.WireDecision(d)}
	if !d.IsConditional() || req.UnconditionalOnly {
		return s
	}
	switch mode {
	case ServeModeConditionsReview:
		s.Answer = e.Encode(d, conditions.RequestBinding(req))
	case ServeModeAdmissionEnforcement:
		if len(d.AllowConditions()) == 0 || !e.AdmissionWebhookSees(req) {
			return s
		}
		enc := e.Encode(d, conditions.RequestBinding(req))
		switch {
		case enc.Type != wire.DecisionTypeConditionsMap:
			s.Answer = enc
		case len(enc.ConditionsMap.AllowConditions) > 0:
			ps := make([]*cedarlang.Policy, len(d.AllowConditions()))
			for i, r := range d.AllowConditions() {
				ps[i] = r.Policy
			}
			reason := engine.AuthorizerName + ": allowed if the conditions of " + engine.DescribePolicies(ps) + " hold in admission"
			s.Answer = wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: &wire.DecisionDetails{Reason: reason}}
			s.Enforced = true
		}
	}
	return s
}

// Names of the authorizers in a chain, as kcedar manifests names them.
const (
	ChainKcedar = engine.AuthorizerName
	ChainRBAC   = "rbac"
)

// Chain is kube-apiserver's authorizer chain around kcedar: kcedar's engine
// answering as kcedar serve does in Mode, and RBAC (its bindings converted
// to Cedar permits by kcedar rbac convert) before or after it.
type Chain struct {
	Kcedar *conditions.Engine
	Mode   ServeMode
	// RBAC decides RBAC's grants; nil: kcedar alone.
	RBAC *engine.Engine
	// RBACFirst: RBAC comes before kcedar in the chain.
	RBACFirst bool
}

// String names the chain as the outputs do: "kcedar, then RBAC", "RBAC,
// then kcedar" or "kcedar alone".
func (c *Chain) String() string {
	switch {
	case c.RBAC == nil:
		return "kcedar alone"
	case c.RBACFirst:
		return "RBAC, then kcedar"
	}
	return "kcedar, then RBAC"
}

// order is the authorizers' names in the chain's order.
func (c *Chain) order() []string {
	switch {
	case c.RBAC == nil:
		return []string{ChainKcedar}
	case c.RBACFirst:
		return []string{ChainRBAC, ChainKcedar}
	}
	return []string{ChainKcedar, ChainRBAC}
}

// ChainAnswer is the chain's answer to one request at authorization time.
type ChainAnswer struct {
	// Kcedar is kcedar's answer; KcedarAsked is false when an authorizer
	// before it decided.
	Kcedar      Served
	KcedarAsked bool
	// RBAC is RBAC's decision (Allow or NoOpinion); nil when not asked.
	RBAC *engine.Decision
	// Answer is the chain's answer as k8s.io/apiserver's union authorizer
	// gives it (and a SubjectAccessReview's status.conditionalDecision
	// carries it): concrete, or a Union of the authorizers' decisions that
	// is still conditional.
	Answer wire.ConditionsAwareDecision
	// By names the authorizer whose Allow or Deny is the answer ("kcedar",
	// "rbac"); empty for NoOpinion and a conditional answer.
	By string
}

// Type is the answer's type: Allow, Deny, NoOpinion or Conditional.
func (a ChainAnswer) Type() engine.DecisionType {
	t, _ := conditions.WireDetails(a.Answer)
	return t
}

// Authorize asks the chain's authorizers in order, as kube-apiserver's union
// does (ConditionsAwareAuthorize): it stops at the first unconditional
// Allow or Deny, and leaves the decision to admission while one may still
// be conditional.
func (c *Chain) Authorize(ctx context.Context, req *entities.Request) ChainAnswer {
	var a ChainAnswer
	var named []namedDecision
	conditional := false
	for _, name := range c.order() {
		var d wire.ConditionsAwareDecision
		if name == ChainKcedar {
			a.Kcedar, a.KcedarAsked = Serve(ctx, c.Kcedar, req, c.Mode), true
			d = a.Kcedar.Answer
		} else {
			rd := c.rbac(ctx, req)
			a.RBAC = &rd
			d = conditions.WireDecision(rd)
		}
		named = append(named, namedDecision{name, d})
		t, _ := conditions.WireDetails(d)
		conditional = conditional || t == engine.DecisionConditional
		if t == engine.DecisionAllow || t == engine.DecisionDeny {
			a.By = name
			break
		}
	}
	if conditional {
		a.Answer = unionOf(named)
	} else {
		a.Answer = concreteUnion(named)
	}
	if t := a.Type(); t != engine.DecisionAllow && t != engine.DecisionDeny {
		a.By = ""
	}
	return a
}

// namedDecision is one authorizer's answer in the chain.
type namedDecision struct {
	name string
	d    wire.ConditionsAwareDecision
}

// unionOf is the chain's answer when one is conditional, as
// k8s.io/apiserver's union builds it (ConditionsAwareDecisionUnion).
func unionOf(named []namedDecision) wire.ConditionsAwareDecision {
	var u authorizer.ConditionsAwareDecisionUnion
	for _, n := range named {
		u.Add(n.name, ConditionsAware(n.d))
	}
	return Wire(u.ToDecision())
}

// concreteUnion is the chain's answer when every authorizer asked answered
// Allow, Deny or NoOpinion: what the union builder consolidates it to (the
// last answer's type; the reasons of the answers of that type, each with
// its authorizer's name; no evaluation error, as ConditionsAware passes
// none), without building the union.
func concreteUnion(named []namedDecision) wire.ConditionsAwareDecision {
	last := named[len(named)-1].d
	t, _ := conditions.WireDetails(last)
	var reasons []string
	for _, n := range named {
		nt, details := conditions.WireDetails(n.d)
		if nt != t || details == nil || details.Reason == "" {
			continue
		}
		reason := details.Reason
		if nt == engine.DecisionNoOpinion {
			reason = noOpinionReason(reason)
		}
		reasons = append(reasons, n.name+": {"+reason+"}")
	}
	out := wire.ConditionsAwareDecision{Type: last.Type}
	details := &wire.DecisionDetails{Reason: strings.Join(reasons, ", ")}
	switch t {
	case engine.DecisionAllow:
		out.Allow = details
	case engine.DecisionDeny:
		out.Deny = details
	default:
		out.NoOpinion = details
	}
	return out
}

// rbac is RBAC's decision: its permits, folded (RBAC has no conditions),
// with a reason worded as RBAC words it.
func (c *Chain) rbac(ctx context.Context, req *entities.Request) engine.Decision {
	r := *req
	r.UnconditionalOnly = true
	d := c.RBAC.Authorize(ctx, &r).FailureDecision()
	if ps := d.Policies(); d.IsAllowed() && len(ps) > 0 {
		return d.WithReason("RBAC: allowed by " + rbacGrant(ps[0]))
	}
	return d.WithReason("")
}

// rbacGrant names the binding, role and subject of a permit kcedar rbac
// convert wrote (its @binding, @role and @subject annotations), else its
// id.
func rbacGrant(p *cedarlang.Policy) string {
	an := map[string]string{}
	for _, a := range p.AST.Annotations {
		an[string(a.Key)] = string(a.Value)
	}
	if an["binding"] == "" || an["role"] == "" {
		return "policy " + p.ID
	}
	grant := an["binding"] + " of " + an["role"]
	if an["subject"] != "" {
		grant += " to " + an["subject"]
	}
	return grant
}

// Admitted is the chain's final decision on req once admission has its
// objects (adm): a conditional answer evaluated as kube-apiserver's union
// evaluates it (each authorizer in order, kcedar's conditions through its
// callback; the first Allow or Deny decides), and, in
// admission-enforcement, kcedar's admission webhook run on a request the
// chain allowed (it rejects one whose conditional allows do not hold). by
// names the authorizer that decided ("" for NoOpinion).
func (c *Chain) Admitted(ctx context.Context, a ChainAnswer, req *entities.Request, adm *conditions.Admission) (d engine.Decision, by string) {
	data := AdmissionDataFor(c.Kcedar.Engine, req, adm)
	switch t := a.Type(); {
	case t == engine.DecisionConditional:
		return c.evaluateUnion(ctx, a.Answer, data)
	case t == engine.DecisionAllow && c.Mode == ServeModeAdmissionEnforcement:
		if v := c.Kcedar.Admit(ctx, data); !v.IsAllowed() {
			return v, ChainKcedar
		}
	}
	return concrete(a.Answer), a.By
}

// evaluateUnion evaluates a conditional chain answer against data, member
// by member (k8s.io/apiserver's union EvaluateConditions): kcedar's
// conditions with kcedar's evaluator, concrete members as they are.
func (c *Chain) evaluateUnion(ctx context.Context, answer wire.ConditionsAwareDecision, data *conditions.AdmissionData) (engine.Decision, string) {
	members := answer.Union
	if answer.Type == wire.DecisionTypeConditionsMap {
		members = []wire.UnionMember{{AuthorizerName: ChainKcedar, Decision: answer}}
	}
	for _, m := range members {
		d := concrete(m.Decision)
		if m.Decision.Type == wire.DecisionTypeConditionsMap {
			d = c.Kcedar.EvaluateConditions(ctx, &m.Decision, data)
		}
		if d.IsAllowed() || d.IsDenied() {
			return d, m.AuthorizerName
		}
	}
	return engine.NoOpinion(nil).WithReason("no authorizer had an opinion"), ""
}

// concrete is a concrete wire decision as an engine decision (a conditional
// one folded: Deny).
func concrete(w wire.ConditionsAwareDecision) engine.Decision {
	t, details := conditions.WireDetails(w)
	reason := ""
	if details != nil {
		reason = details.Reason
	}
	switch t {
	case engine.DecisionAllow:
		return engine.Allowed(nil, nil).WithReason(reason)
	case engine.DecisionNoOpinion:
		return engine.NoOpinion(nil).WithReason(reason)
	}
	return engine.Denied(nil, nil).WithReason(reason)
}

// AdmissionDataFor is what admission sees of req with the objects of adm:
// the operation, the resource the request resolves to in e's schema, the
// names and the user, as the callback and the admission webhook read them.
func AdmissionDataFor(e *engine.Engine, req *entities.Request, adm *conditions.Admission) *conditions.AdmissionData {
	data := &conditions.AdmissionData{
		APIGroup: req.APIGroup, APIVersion: req.APIVersion, Resource: req.Resource, Subresource: req.Subresource,
		Namespace: req.Namespace, Name: req.Name, User: &req.User,
	}
	if adm != nil {
		data.Operation, data.Object, data.OldObject = adm.Operation, adm.Object, adm.OldObject
	}
	if t := entities.ResolveTarget(e.Schema(), req); t.Resource != nil {
		data.APIGroup, data.Resource, data.Subresource = t.Resource.Key.Group, t.Resource.Key.Resource, t.Resource.Key.Subresource
	}
	return data
}
