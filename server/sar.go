package server

import (
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/residual/wire"
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
	req, err := cedar.RequestFromSAR(&sar.Spec.SubjectAccessReviewSpec)
	if err != nil {
		s.writeError(w, "authorize", badRequest("invalid SubjectAccessReview: %v", err))
		return
	}
	ps := s.store.Current()
	if ps == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	upstream := sar.Spec.AuthorizationOptions.Handles(wire.DecisionTypeConditionsMap)
	draft := sar.Spec.ConditionalAuthorization != nil && sar.Spec.ConditionalAuthorization.Mode != wire.ConditionsModeNone
	start := time.Now()
	az := residual.Authorizer{Schema: s.Schema(), Policies: ps, Cache: s.outcomes}
	out := az.Authorize(req, residual.Options{Conditions: upstream || draft || s.enforce})
	var status wire.SubjectAccessReviewStatus
	label := out.Decision.String()
	switch {
	case !out.Conditional:
		status.SubjectAccessReviewStatus = statusFor(out)
	case upstream || draft:
		dec := s.codec.Decision(out)
		label = string(dec.Type)
		if dec.Type != wire.DecisionTypeConditionsMap {
			status.SubjectAccessReviewStatus = concreteStatus(dec)
			break
		}
		if upstream {
			status.ConditionalDecision = &dec
		} else {
			status.ConditionsChain = []wire.SubjectAccessReviewConditionSet{draftConditionSet(dec.ConditionsMap)}
		}
		label = "Conditional"
	case s.enforce && len(out.Allow) > 0 && s.webhookVerified.Load():
		// kcedar's admission webhook enforces the conditions: admission sees
		// every request that can produce conditions (AdmissionShapes).
		dec := s.codec.Decision(out)
		if dec.Type == wire.DecisionTypeConditionsMap && len(dec.ConditionsMap.AllowConditions) > 0 {
			status.Allowed = true
			status.Reason = "kcedar: allowed if the conditions of " + residual.DescribePolicies(allowPolicies(out)) + " hold in admission"
			label = "ConditionalAllow"
			break
		}
		status.SubjectAccessReviewStatus = concreteStatus(dec)
		label = string(dec.Type)
	default:
		folded := out.Fold()
		status.SubjectAccessReviewStatus = statusFor(folded)
		label = folded.Decision.String()
	}
	s.metrics.decisionDuration.WithLabelValues("authorize").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("authorize", label).Inc()
	s.logDecision(req, label, out, status, ps, time.Since(start))
	writeJSON(w, sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: status})
}

func allowPolicies(o residual.Outcome) []*cedar.Policy {
	ps := make([]*cedar.Policy, len(o.Allow))
	for i, r := range o.Allow {
		ps[i] = r.Policy
	}
	return ps
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

// statusFor renders an unconditional outcome as a SubjectAccessReview status.
func statusFor(out residual.Outcome) authorizationv1.SubjectAccessReviewStatus {
	var st authorizationv1.SubjectAccessReviewStatus
	switch out.Decision {
	case cedar.Allow:
		st.Allowed = true
		st.Reason = "kcedar: allowed by " + residual.DescribePolicies(out.Policies)
	case cedar.Deny:
		st.Denied = true
		st.Reason = "kcedar: denied by " + residual.DescribePolicies(out.Policies)
	default:
		st.Reason = "kcedar: no policy applies"
	}
	if len(out.Errors) > 0 {
		st.EvaluationError = strings.Join(out.Errors, "; ")
	}
	return st
}
