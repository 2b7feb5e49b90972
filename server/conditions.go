package server

import (
	"encoding/json"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/residual/wire"
)

var conditionsReviewType = typeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind}

type conditionsReviewRequest struct {
	typeMeta
	Request *wire.AuthorizationConditionsRequest `json:"request"`
}

// handleConditions is the KEP's callback: it evaluates the conditions kcedar
// returned against the admission data, using nothing but the request.
func (s *Server) handleConditions(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		s.writeError(w, "conditions", err)
		return
	}
	var review conditionsReviewRequest
	if err := decodeJSON(body, &review); err != nil {
		s.writeError(w, "conditions", err)
		return
	}
	if err := checkType(review.typeMeta, conditionsReviewType); err != nil {
		s.writeError(w, "conditions", err)
		return
	}
	req := review.Request
	if req == nil {
		s.writeError(w, "conditions", badRequest("request is missing"))
		return
	}
	start := time.Now()
	ev := s.evaluator.Load()
	resp := &wire.AuthorizationConditionsResponse{}
	switch {
	case req.Decision != nil:
		if req.AdmissionRequest == nil {
			s.writeError(w, "conditions", badRequest("request.admissionRequest is missing"))
			return
		}
		data := admissionData(req.AdmissionRequest)
		v := ev.EvaluateDecision(req.Decision, data)
		resp.UID = req.AdmissionRequest.UID
		d := verdictDecision(v)
		resp.Decision = &d
		resp.Allowed, resp.Denied, resp.Reason, resp.EvaluationError = v.Decision == cedar.Allow, v.Decision == cedar.Deny, v.Reason, v.EvaluationError
		s.metrics.decisions.WithLabelValues("conditions", v.Decision.String()).Inc()
	case req.ConditionSets != nil:
		data := &residual.AdmissionData{Operation: req.Operation, Namespace: req.Namespace, Name: req.Name, Object: req.Object.Raw, OldObject: req.OldObject.Raw}
		v := s.evaluateChain(ev, req.ConditionSets, data)
		resp.Allowed, resp.Denied, resp.Reason, resp.EvaluationError = v.Decision == cedar.Allow, v.Decision == cedar.Deny, v.Reason, v.EvaluationError
		s.metrics.decisions.WithLabelValues("conditions", v.Decision.String()).Inc()
	default:
		s.writeError(w, "conditions", badRequest("request has neither decision (upstream) nor conditionSets (draft)"))
		return
	}
	s.metrics.decisionDuration.WithLabelValues("conditions").Observe(time.Since(start).Seconds())
	writeJSON(w, wire.AuthorizationConditionsReview{
		TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Response: resp,
	})
}

// evaluateChain evaluates the draft's conditionsChain: in order, until one
// set is not NoOpinion. Only sets kcedar authored are evaluated; a set of
// another authorizer cannot be, so it fails closed.
func (s *Server) evaluateChain(ev *residual.Evaluator, sets []wire.SubjectAccessReviewConditionSet, data *residual.AdmissionData) residual.Verdict {
	for _, set := range sets {
		var v residual.Verdict
		switch {
		case set.Allowed:
			v = residual.Verdict{Decision: cedar.Allow, Reason: set.AuthorizerName + " allowed"}
		case set.Denied:
			v = residual.Verdict{Decision: cedar.Deny, Reason: set.AuthorizerName + " denied"}
		case set.AuthorizerName != AuthorizerName:
			v = residual.Verdict{Decision: cedar.Deny, Reason: "kcedar: cannot evaluate conditions of authorizer " + set.AuthorizerName, EvaluationError: "foreign condition set"}
		default:
			m := &wire.ConditionsMap{}
			bad := ""
			for _, c := range set.Conditions {
				wc := wire.Condition{ID: c.ID, Type: c.Type, Condition: c.Condition, Description: c.Description}
				switch c.Effect {
				case wire.ConditionEffectDeny:
					m.DenyConditions = append(m.DenyConditions, wc)
				case wire.ConditionEffectNoOpinion:
					m.NoOpinionConditions = append(m.NoOpinionConditions, wc)
				case wire.ConditionEffectAllow:
					m.AllowConditions = append(m.AllowConditions, wc)
				default:
					bad = "condition " + c.ID + " has unknown effect " + string(c.Effect)
				}
			}
			if bad != "" {
				v = residual.Verdict{Decision: cedar.Deny, Reason: "kcedar: malformed condition set", EvaluationError: bad}
			} else {
				v = ev.EvaluateMap(m, data)
			}
		}
		if v.Decision != cedar.NoOpinion {
			return v
		}
	}
	return residual.Verdict{Decision: cedar.NoOpinion, Reason: "kcedar: no condition set decided"}
}

func verdictDecision(v residual.Verdict) wire.ConditionsAwareDecision {
	details := &wire.DecisionDetails{Reason: v.Reason, EvaluationError: v.EvaluationError}
	switch v.Decision {
	case cedar.Allow:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details}
	case cedar.Deny:
		return wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details}
	}
	return wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details}
}

// admissionData extracts what conditions see from an AdmissionRequest.
func admissionData(a *admissionv1.AdmissionRequest) *residual.AdmissionData {
	d := &residual.AdmissionData{
		Operation: string(a.Operation),
		APIGroup:  a.Resource.Group, APIVersion: a.Resource.Version, Resource: a.Resource.Resource, Subresource: a.SubResource,
		Namespace: a.Namespace, Name: a.Name,
		Object: a.Object.Raw, OldObject: a.OldObject.Raw,
		User: &cedar.UserInfo{Name: a.UserInfo.Username, UID: a.UserInfo.UID, Groups: a.UserInfo.Groups},
	}
	if len(a.UserInfo.Extra) > 0 {
		d.User.Extra = make(map[string][]string, len(a.UserInfo.Extra))
		for k, v := range a.UserInfo.Extra {
			d.User.Extra[k] = v
		}
	}
	return d
}

var admissionReviewType = typeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}

// handleAdmit is the validating admission webhook that enforces conditions on
// clusters without conditional authorization (--admission-enforcement).
func (s *Server) handleAdmit(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		s.writeError(w, "admit", err)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		s.writeError(w, "admit", badRequest("decoding body: %v", err))
		return
	}
	if err := checkType(typeMeta{review.APIVersion, review.Kind}, admissionReviewType); err != nil {
		s.writeError(w, "admit", err)
		return
	}
	if review.Request == nil {
		s.writeError(w, "admit", badRequest("request is missing"))
		return
	}
	ps := s.store.Current()
	if ps == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	data := admissionData(review.Request)
	az := &residual.Authorizer{Schema: s.Schema(), Policies: ps, Cache: s.outcomes}
	v := residual.Admit(az, s.evaluator.Load(), s.codec, data, optionsKind(review.Request))
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: v.Decision == cedar.Allow}
	if !resp.Allowed {
		msg := v.Reason
		if v.EvaluationError != "" {
			msg += " (evaluation error: " + v.EvaluationError + ")"
		}
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	s.metrics.decisionDuration.WithLabelValues("admit").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("admit", v.Decision.String()).Inc()
	writeJSON(w, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewType.APIVersion, Kind: admissionReviewType.Kind}, Response: resp})
}

func optionsKind(a *admissionv1.AdmissionRequest) string {
	var tm typeMeta
	if len(a.Options.Raw) > 0 && json.Unmarshal(a.Options.Raw, &tm) == nil {
		return tm.Kind
	}
	return ""
}
