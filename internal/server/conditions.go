package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
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
	az := s.Authorizer()
	if az == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	resp := &wire.AuthorizationConditionsResponse{}
	switch {
	case req.Decision != nil:
		if req.AdmissionRequest == nil {
			s.writeError(w, "conditions", badRequest("request.admissionRequest is missing"))
			return
		}
		data := admissionData(req.AdmissionRequest)
		v := az.EvaluateConditions(req.Decision, data)
		resp.UID = req.AdmissionRequest.UID
		d := engine.WireDecision(v)
		resp.Decision = &d
		resp.Allowed, resp.Denied, resp.Reason, resp.EvaluationError = v.IsAllowed(), v.IsDenied(), v.Reason(), v.EvaluationError()
		s.metrics.decisions.WithLabelValues("conditions", v.Type().String()).Inc()
	case req.ConditionSets != nil:
		data := &engine.AdmissionData{Operation: req.Operation, Namespace: req.Namespace, Name: req.Name, Object: req.Object.Raw, OldObject: req.OldObject.Raw}
		v := s.evaluateChain(az, req.ConditionSets, data)
		resp.Allowed, resp.Denied, resp.Reason, resp.EvaluationError = v.IsAllowed(), v.IsDenied(), v.Reason(), v.EvaluationError()
		s.metrics.decisions.WithLabelValues("conditions", v.Type().String()).Inc()
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
func (s *Server) evaluateChain(az engine.Authorizer, sets []wire.SubjectAccessReviewConditionSet, data *engine.AdmissionData) engine.Decision {
	for _, set := range sets {
		var v engine.Decision
		switch {
		case set.Allowed:
			v = engine.Allowed(nil, nil).WithReason(set.AuthorizerName + " allowed")
		case set.Denied:
			v = engine.Denied(nil, nil).WithReason(set.AuthorizerName + " denied")
		case set.AuthorizerName != AuthorizerName:
			v = engine.Denied(nil, []error{errors.New("foreign condition set")}).WithReason("kcedar: cannot evaluate conditions of authorizer " + set.AuthorizerName)
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
				v = engine.Denied(nil, []error{errors.New(bad)}).WithReason("kcedar: malformed condition set")
			} else {
				v = az.EvaluateConditions(&wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: m}, data)
			}
		}
		if v.Type() != engine.DecisionNoOpinion {
			return v
		}
	}
	return engine.NoOpinion(nil).WithReason("kcedar: no condition set decided")
}

// admissionData extracts what conditions see from an AdmissionRequest.
func admissionData(a *admissionv1.AdmissionRequest) *engine.AdmissionData {
	d := &engine.AdmissionData{
		Operation: string(a.Operation),
		APIGroup:  a.Resource.Group, APIVersion: a.Resource.Version, Resource: a.Resource.Resource, Subresource: a.SubResource,
		Namespace: a.Namespace, Name: a.Name,
		Object: a.Object.Raw, OldObject: a.OldObject.Raw,
		User: &entities.UserInfo{Name: a.UserInfo.Username, UID: a.UserInfo.UID, Groups: a.UserInfo.Groups},
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
	az := s.Authorizer()
	if az == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	data := admissionData(review.Request)
	v := az.Admit(data, optionsKind(review.Request))
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: v.IsAllowed()}
	if !resp.Allowed {
		msg := v.Reason()
		if ee := v.EvaluationError(); ee != "" {
			msg += " (evaluation error: " + ee + ")"
		}
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	s.metrics.decisionDuration.WithLabelValues("admit").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("admit", v.Type().String()).Inc()
	writeJSON(w, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewType.APIVersion, Kind: admissionReviewType.Kind}, Response: resp})
}

func optionsKind(a *admissionv1.AdmissionRequest) string {
	var tm typeMeta
	if len(a.Options.Raw) > 0 && json.Unmarshal(a.Options.Raw, &tm) == nil {
		return tm.Kind
	}
	return ""
}
