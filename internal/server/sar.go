package server

import (
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

var sarType = typeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}

// AuthorizerName is how kcedar names itself in the draft's conditionsChain.
const AuthorizerName = "kcedar"

// sarRequest is the part of a SubjectAccessReview kcedar reads, decoded in
// one pass, with the KEP's spec fields.
type sarRequest struct {
	typeMeta
	Spec wire.SubjectAccessReviewSpec `json:"spec"`
}

// sarResponse is the SubjectAccessReview kube-apiserver reads back: only the
// status matters to it.
type sarResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Status     wire.SubjectAccessReviewStatus `json:"status"`
}

func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		s.writeError(w, "authorize", err)
		return
	}
	var sar sarRequest
	if err := decodeJSON(body, &sar); err != nil {
		s.writeError(w, "authorize", err)
		return
	}
	if err := checkType(sar.typeMeta, sarType); err != nil {
		s.writeError(w, "authorize", err)
		return
	}
	req, err := entities.RequestFromSAR(&sar.Spec.SubjectAccessReviewSpec)
	if err != nil {
		s.writeError(w, "authorize", badRequest("invalid SubjectAccessReview: %v", err))
		return
	}
	az := s.Authorizer()
	if az == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	// Upstream returns conditions only to a caller that handles both
	// ConditionsMap and Union (k8s.io/apiserver's webhook authorizer); the
	// seed draft's callers ask with conditionalAuthorization.mode.
	opts := sar.Spec.AuthorizationOptions
	upstream := opts.Handles(wire.DecisionTypeConditionsMap) && opts.Handles(wire.DecisionTypeUnion)
	draft := sar.Spec.ConditionalAuthorization != nil && sar.Spec.ConditionalAuthorization.Mode != wire.ConditionsModeNone
	start := time.Now()
	d := az.Authorize(req)
	var status wire.SubjectAccessReviewStatus
	label := d.Type().String()
	switch {
	case !d.IsConditional():
		status.SubjectAccessReviewStatus = statusFor(d)
	case upstream || draft:
		dec := az.Encode(d)
		label = string(dec.Type)
		if dec.Type != wire.DecisionTypeConditionsMap {
			status.SubjectAccessReviewStatus = concreteStatus(dec)
			break
		}
		if upstream {
			status.ConditionalDecision = &dec
		} else if draftFits(dec.ConditionsMap) {
			status.ConditionsChain = []wire.SubjectAccessReviewConditionSet{draftConditionSet(dec.ConditionsMap)}
		} else {
			// The draft's callers take conditions of at most 1,024 bytes.
			folded := d.FailureDecision()
			status.SubjectAccessReviewStatus = statusFor(folded)
			label = folded.Type().String()
			break
		}
		label = "Conditional"
	case s.enforce && len(d.AllowConditions()) > 0 && s.webhookVerified.Load():
		// kcedar's admission webhook enforces the conditions: admission sees
		// every request that can produce conditions (AdmissionShapes).
		dec := az.Encode(d)
		if dec.Type == wire.DecisionTypeConditionsMap && len(dec.ConditionsMap.AllowConditions) > 0 {
			status.Allowed = true
			status.Reason = "kcedar: allowed if the conditions of " + engine.DescribePolicies(allowPolicies(d)) + " hold in admission"
			label = "ConditionalAllow"
			break
		}
		status.SubjectAccessReviewStatus = concreteStatus(dec)
		label = string(dec.Type)
	default:
		folded := d.FailureDecision()
		status.SubjectAccessReviewStatus = statusFor(folded)
		label = folded.Type().String()
	}
	s.metrics.decisionDuration.WithLabelValues("authorize").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("authorize", label).Inc()
	s.logDecision(req, label, d, status, az.Policies(), time.Since(start))
	writeJSON(w, sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: status})
}

func allowPolicies(d engine.Decision) []*cedarlang.Policy {
	ps := make([]*cedarlang.Policy, len(d.AllowConditions()))
	for i, r := range d.AllowConditions() {
		ps[i] = r.Policy
	}
	return ps
}

// draftFits reports whether every condition fits the seed draft's limit.
func draftFits(m *wire.ConditionsMap) bool {
	for _, l := range [][]wire.Condition{m.DenyConditions, m.NoOpinionConditions, m.AllowConditions} {
		for _, c := range l {
			if len(c.Condition) > wire.DraftMaxConditionBytes {
				return false
			}
		}
	}
	return true
}

// draftConditionSet renders a ConditionsMap in the seed draft's shape.
func draftConditionSet(m *wire.ConditionsMap) wire.SubjectAccessReviewConditionSet {
	set := wire.SubjectAccessReviewConditionSet{AuthorizerName: AuthorizerName, FailureMode: "Deny"}
	add := func(conds []wire.Condition, effect wire.SubjectAccessReviewConditionEffect) {
		for _, c := range conds {
			set.Conditions = append(set.Conditions, wire.SubjectAccessReviewCondition{ID: c.ID, Effect: effect, Type: c.Type, Condition: c.Condition, Description: c.Description})
		}
	}
	add(m.DenyConditions, wire.ConditionEffectDeny)
	add(m.NoOpinionConditions, wire.ConditionEffectNoOpinion)
	add(m.AllowConditions, wire.ConditionEffectAllow)
	return set
}

// concreteStatus renders a concrete ConditionsAwareDecision as allowed/denied.
func concreteStatus(d wire.ConditionsAwareDecision) authorizationv1.SubjectAccessReviewStatus {
	var st authorizationv1.SubjectAccessReviewStatus
	var details *wire.DecisionDetails
	switch d.Type {
	case wire.DecisionTypeAllow:
		st.Allowed, details = true, d.Allow
	case wire.DecisionTypeDeny:
		st.Denied, details = true, d.Deny
	default:
		details = d.NoOpinion
	}
	if details != nil {
		st.Reason, st.EvaluationError = details.Reason, details.EvaluationError
	}
	return st
}

// statusFor renders a concrete decision (a conditional one folded) as a
// SubjectAccessReview status.
func statusFor(d engine.Decision) authorizationv1.SubjectAccessReviewStatus {
	d = d.FailureDecision()
	return authorizationv1.SubjectAccessReviewStatus{
		Allowed:         d.IsAllowed(),
		Denied:          d.IsDenied(),
		Reason:          d.Reason(),
		EvaluationError: d.EvaluationError(),
	}
}
