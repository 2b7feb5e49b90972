package server

import (
	"context"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
)

// This file renders decisions for every consumer; nothing else builds a
// consumer's answer from an engine.Decision. Labels (metrics, the decision log) are
// rendered here too, so they always match the answer that was sent.

// authorizerName is how kcedar names itself in its reasons.
const authorizerName = engine.AuthorizerName

// Labels of a SubjectAccessReview answer, beside engine.DecisionType's names.
const (
	// labelConditional: conditions were sent (conditionalDecision).
	labelConditional = "Conditional"
	// labelConditionalAllow: an Allow whose conditions kcedar's admission
	// webhook enforces (--admission-enforcement).
	labelConditionalAllow = "ConditionalAllow"
)

// sarCaller is what the caller of a SubjectAccessReview can take.
type sarCaller struct {
	// Upstream: the caller handles every decision type of conditional
	// authorization (KEP-5681 as k8s.io/apiserver's webhook authorizer
	// implements it: Allow, Deny, NoOpinion, ConditionsMap and Union).
	Upstream bool
	// AdmissionEnforced: kcedar's admission webhook is verified to enforce
	// conditional allows (--admission-enforcement on a cluster without the
	// feature). A conditional allow is then answered Allow only for a
	// request that webhook will see (admissionSees); any other request gets
	// the folded decision.
	AdmissionEnforced bool
	// MayBeAggregated reports whether a group version may be served by an
	// aggregated API server, whose requests bypass kube-apiserver's
	// admission webhooks (Options.AggregatedAPI); nil: any may be.
	MayBeAggregated func(group, version string) bool
}

// admissionSees reports whether req, once allowed, reaches kcedar's
// admission webhook: the engine's AdmissionWebhookSees (a write or connect
// of a typed resource that kube-apiserver sends to webhooks) of a group
// version kube-apiserver serves itself, not one it proxies to an
// aggregated API server.
func (c sarCaller) admissionSees(e *engine.Engine, req *entities.Request) bool {
	return e.AdmissionWebhookSees(req) && c.MayBeAggregated != nil && !c.MayBeAggregated(req.APIGroup, req.APIVersion)
}

// takesConditions reports whether a conditional decision can mean more to
// the caller than its folded form (Decision.FailureDecision).
func (c sarCaller) takesConditions() bool { return c.Upstream || c.AdmissionEnforced }

// sarAnswer is a rendered SubjectAccessReview answer, its label and the
// decision it renders.
type sarAnswer struct {
	Decision engine.Decision
	Status   wire.SubjectAccessReviewStatus
	// Label names the answer for metrics and the decision log: Allow, Deny,
	// NoOpinion, Conditional or ConditionalAllow.
	Label string
}

// authorizeSubjectAccessReview decides req with e, then renders the answer
// for caller; st (nil: not wanted) gets the engine's stats of the decision.
func authorizeSubjectAccessReview(ctx context.Context, e *engine.Engine, req *entities.Request, caller sarCaller, st *engine.Stats) sarAnswer {
	aware := caller.Upstream
	if !caller.takesConditions() {
		// Nothing will evaluate a condition of this answer, so the engine
		// folds as it decides: it stops at the first forbid that may deny
		// and reads no permit that can only leave a condition.
		req.UnconditionalOnly = true
	}
	d := e.AuthorizeWithStats(ctx, req, st)
	switch {
	case req.UnconditionalOnly:
		caller = sarCaller{} // conditional rights do not count: fold
	case caller.AdmissionEnforced && d.IsConditional() && !caller.admissionSees(e, req):
		caller.AdmissionEnforced = false
	}
	a := renderSubjectAccessReview(e, d, req, caller)
	a.Decision = d
	if aware {
		a.Status = errorInReason(a.Status)
	}
	return a
}

// errorInReason is status for a caller of conditional authorization: its
// evaluation error moved into the reason (upstream.ReasonWithError), which
// such a caller would take for kcedar failing.
func errorInReason(status wire.SubjectAccessReviewStatus) wire.SubjectAccessReviewStatus {
	status.Reason = upstream.ReasonWithError(status.Reason, status.EvaluationError)
	status.EvaluationError = ""
	return status
}

// renderSubjectAccessReview renders d for a SubjectAccessReview caller:
// conditions go only to a caller that takes them (signed, as upstream's
// conditionalDecision); otherwise a Conditional decision is folded
// (engine.Decision.FailureDecision), or with verified admission enforcement
// answered Allow while the webhook enforces the conditions. Conditions are
// signed for req (RequestBinding).
func renderSubjectAccessReview(e *engine.Engine, d engine.Decision, req *entities.Request, caller sarCaller) sarAnswer {
	switch {
	case !d.IsConditional():
		return plainAnswer(d)
	case caller.Upstream:
		return conditionsAnswer(e, d, req)
	case caller.AdmissionEnforced && len(d.AllowConditions()) > 0:
		return admissionEnforcedAnswer(e, d, req)
	}
	return plainAnswer(d)
}

// plainAnswer is d (folded if Conditional) as allowed / denied / neither.
func plainAnswer(d engine.Decision) sarAnswer {
	d = d.FailureDecision()
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: statusOf(d)}, Label: d.Type().String()}
}

// conditionsAnswer signs d's conditions for a caller that takes them, bound
// to req.
func conditionsAnswer(e *engine.Engine, d engine.Decision, req *entities.Request) sarAnswer {
	dec := e.Encode(d, engine.RequestBinding(req))
	if dec.Type != wire.DecisionTypeConditionsMap {
		return wireAnswer(dec)
	}
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{ConditionalDecision: &dec}, Label: labelConditional}
}

// admissionEnforcedAnswer allows a conditional allow whose conditions
// kcedar's admission webhook enforces: admission sees every request that can
// produce conditions (AdmissionShapes). The conditions are encoded only to
// learn which fit; the admission webhook computes and signs them again.
func admissionEnforcedAnswer(e *engine.Engine, d engine.Decision, req *entities.Request) sarAnswer {
	dec := e.Encode(d, engine.RequestBinding(req))
	if dec.Type != wire.DecisionTypeConditionsMap {
		return wireAnswer(dec)
	}
	if len(dec.ConditionsMap.AllowConditions) == 0 {
		// Only deny conditions were encoded (the allow conditions were
		// dropped): nothing to enforce in admission, so fold as for a caller
		// that cannot take conditions (Deny, since deny conditions exist).
		return plainAnswer(d)
	}
	ps := make([]*cedarlang.Policy, len(d.AllowConditions()))
	for i, r := range d.AllowConditions() {
		ps[i] = r.Policy
	}
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: true,
		Reason: "kcedar: allowed if the conditions of " + engine.DescribePolicies(ps) + " hold in admission"}
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: labelConditionalAllow}
}

// wireAnswer renders a concrete ConditionsAwareDecision (one that Encode
// could not keep conditional) as allowed / denied / neither.
func wireAnswer(d wire.ConditionsAwareDecision) sarAnswer {
	t, details := engine.WireDetails(d)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: t == engine.DecisionAllow, Denied: t == engine.DecisionDeny}
	if details != nil {
		st.Reason, st.EvaluationError = apiServerReason(t == engine.DecisionNoOpinion, details.Reason), details.EvaluationError
	}
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: string(d.Type)}
}

// statusOf is a concrete decision as a SubjectAccessReview status.
func statusOf(d engine.Decision) authorizationv1.SubjectAccessReviewStatus {
	return authorizationv1.SubjectAccessReviewStatus{
		Allowed: d.IsAllowed(), Denied: d.IsDenied(), Reason: apiServerReason(d.Type() == engine.DecisionNoOpinion, d.Reason()), EvaluationError: d.EvaluationError(),
	}
}

// reasonPrefix starts every reason kcedar gives.
const reasonPrefix = authorizerName + ": "

// apiServerReason is a reason as kcedar sends it to kube-apiserver, whose
// union authorizer passes an Allow's or a Deny's reason on as it is but
// prefixes a NoOpinion's with the authorizer's name in the
// AuthorizationConfiguration ("kcedar", as kcedar manifests names it;
// k8s.io/apiserver pkg/authorization/union, Authorize and
// EvaluateConditions). So a NoOpinion's reason goes out without kcedar's own
// prefix, and the 403 or kubectl auth can-i reads "kcedar: " once.
func apiServerReason(noOpinion bool, reason string) string {
	if noOpinion {
		return strings.TrimPrefix(reason, reasonPrefix)
	}
	return reason
}

// renderConditionsResponse renders the conditions callback's answer to the
// admission request uid.
func renderConditionsResponse(d engine.Decision, uid types.UID) *wire.AuthorizationConditionsResponse {
	dec := engine.WireDecision(d)
	_, details := engine.WireDetails(dec)
	details.Reason = upstream.ReasonWithError(apiServerReason(dec.NoOpinion != nil, details.Reason), details.EvaluationError)
	details.EvaluationError = ""
	return &wire.AuthorizationConditionsResponse{UID: uid, Decision: dec}
}

// renderAdmissionResponse renders kcedar's admission webhook answer to
// request uid: allowed, or refused with the reason and any evaluation error.
func renderAdmissionResponse(d engine.Decision, uid types.UID) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: d.IsAllowed()}
	if !resp.Allowed {
		msg := d.Reason()
		if ee := d.EvaluationError(); ee != "" {
			msg += " (evaluation error: " + ee + ")"
		}
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	return resp
}

// label names a decision for metrics and the decision log.
func label(d engine.Decision) string { return d.Type().String() }
