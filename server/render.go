package server

import (
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
)

// This file renders decisions for every consumer; nothing else builds a
// consumer's answer from a decision. Labels (metrics, the decision log) are
// rendered here too, so they always match the answer that was sent.

// authorizerName is how kcedar names itself in its reasons.
const authorizerName = engine.AuthorizerName

// Labels of a SubjectAccessReview answer, beside Allow, Deny and NoOpinion.
const (
	// labelConditional: conditions were sent (conditionalDecision).
	labelConditional = "Conditional"
	// labelConditionalAllow: an Allow whose conditions the admission
	// webhook enforces (Options.AdmissionEnforcer).
	labelConditionalAllow = "ConditionalAllow"
)

// sarAnswer is a rendered SubjectAccessReview answer and its label.
type sarAnswer struct {
	Status wire.SubjectAccessReviewStatus
	// Label names the answer for metrics and the decision log: Allow, Deny,
	// NoOpinion, Conditional or ConditionalAllow.
	Label string
}

// conditionsAnswer renders d for a caller that handles every decision type
// of conditional authorization: its conditions (the conditionalDecision,
// unions included) when it has any the caller can be sent, otherwise the
// concrete decision with its error in the reason (errorInReason).
func conditionsAnswer(d authorizer.ConditionsAwareDecision) sarAnswer {
	if !d.IsUnconditional() {
		w := upstream.Wire(d)
		if wire.Validate(&w) == nil {
			return sarAnswer{Status: wire.SubjectAccessReviewStatus{ConditionalDecision: &w}, Label: labelConditional}
		}
		d = authorizer.ConditionsAwareDecisionFromParts(d.FailureDecision(), "failed closed: the conditions cannot be sent to this caller", nil)
	}
	t, reason := authorizer.DecisionDeny, d.Reason()
	switch {
	case d.IsAllow():
		t = authorizer.DecisionAllow
	case d.IsNoOpinion():
		t = authorizer.DecisionNoOpinion
	}
	a := plainAnswer(t, reason, "")
	if err := d.Error(); err != nil {
		a.Status.Reason = upstream.ReasonWithError(a.Status.Reason, err.Error())
	}
	return a
}

// plainAnswer is an unconditional decision as allowed / denied / neither,
// with its reason and evaluation error.
func plainAnswer(t authorizer.Decision, reason, evaluationError string) sarAnswer {
	st := authorizationv1.SubjectAccessReviewStatus{Reason: reason, EvaluationError: evaluationError}
	switch t {
	case authorizer.DecisionAllow:
		st.Allowed = true
		return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: "Allow"}
	case authorizer.DecisionNoOpinion:
		st.Reason = apiServerReason(true, reason)
		return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: "NoOpinion"}
	}
	st.Denied = true
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: "Deny"}
}

// enforcedAnswer is an Allow whose conditions the admission webhook
// enforces.
func enforcedAnswer(reason string) sarAnswer {
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: reason}
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: labelConditionalAllow}
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

// conditionsResponse renders the conditions callback's answer to the
// admission request uid: the decision, its reason, and any error in the
// reason (never in evaluationError, which kube-apiserver 1.38 takes for the
// authorizer failing).
func conditionsResponse(t authorizer.Decision, reason string, err error, uid types.UID) *wire.AuthorizationConditionsResponse {
	details := &wire.DecisionDetails{Reason: reason}
	if err != nil {
		details.Reason = upstream.ReasonWithError(reason, err.Error())
	}
	dec := wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details}
	switch t {
	case authorizer.DecisionAllow:
		dec = wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details}
	case authorizer.DecisionNoOpinion:
		details.Reason = apiServerReason(true, details.Reason)
		dec = wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details}
	}
	return &wire.AuthorizationConditionsResponse{UID: uid, Decision: dec}
}

// admissionResponse renders the admission webhook's answer to request uid:
// allowed, or refused with reason.
func admissionResponse(allowed bool, reason string, uid types.UID) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: allowed}
	if !allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: reason}
	}
	return resp
}

// decisionLabel names an unconditional decision for metrics.
func decisionLabel(t authorizer.Decision) string {
	switch t {
	case authorizer.DecisionAllow:
		return "Allow"
	case authorizer.DecisionNoOpinion:
		return "NoOpinion"
	}
	return "Deny"
}
