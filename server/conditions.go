package server

import (
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
	var review conditionsReviewRequest
	if !s.decodeWebhook(w, r, "conditions", &review, func() error { return checkType(review.typeMeta, conditionsReviewType) }) {
		return
	}
	req := review.Request
	switch {
	case req == nil:
		s.writeError(w, "conditions", badRequest("request is missing"))
		return
	case req.UnsupportedConditionSets != nil:
		s.writeError(w, "conditions", badRequest("request.conditionSets is not a Kubernetes field (an early KEP-5681 proposal): "+
			"send request.decision and request.admissionRequest, as Kubernetes 1.38 does"))
		return
	case req.Decision == nil:
		s.writeError(w, "conditions", badRequest("request.decision is missing"))
		return
	case req.AdmissionRequest == nil:
		s.writeError(w, "conditions", badRequest("request.admissionRequest is missing"))
		return
	}
	if s.serving == nil {
		s.conditionsUpstream(w, r, req)
		return
	}
	ev := s.serving.Evaluator()
	if ev == nil {
		http.Error(w, "no schema is loaded", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	v := ev.EvaluateDecision(req.Decision, admissionData(req.AdmissionRequest))
	resp := renderConditionsResponse(v, req.AdmissionRequest.UID)
	traceConditions(s.recordingSpan(r.Context()), req, v)
	s.metrics.decisions.WithLabelValues("conditions", label(v)).Inc()
	s.metrics.decisionDuration.WithLabelValues("conditions").Observe(time.Since(start).Seconds())
	writeJSON(w, wire.AuthorizationConditionsReview{
		TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Response: resp,
	})
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
	var review admissionv1.AdmissionReview
	if !s.decodeWebhook(w, r, "admit", &review, func() error {
		return checkType(typeMeta{review.APIVersion, review.Kind}, admissionReviewType)
	}) {
		return
	}
	if review.Request == nil {
		s.writeError(w, "admit", badRequest("request is missing"))
		return
	}
	e := s.engineOr503(w)
	if e == nil {
		return
	}
	start := time.Now()
	v := e.Admit(r.Context(), admissionData(review.Request))
	s.metrics.decisionDuration.WithLabelValues("admit").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("admit", label(v)).Inc()
	traceAdmit(s.recordingSpan(r.Context()), review.Request, v)
	writeJSON(w, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewType.APIVersion, Kind: admissionReviewType.Kind},
		Response: renderAdmissionResponse(v, review.Request.UID)})
}

// conditionsUpstream answers the callback for an authorizer other than
// kcedar's.
func (s *Server) conditionsUpstream(w http.ResponseWriter, r *http.Request, req *wire.AuthorizationConditionsRequest) {
	start := time.Now()
	resp := s.evaluateUpstream(r.Context(), req)
	s.metrics.decisions.WithLabelValues("conditions", string(resp.Decision.Type)).Inc()
	s.metrics.decisionDuration.WithLabelValues("conditions").Observe(time.Since(start).Seconds())
	writeJSON(w, wire.AuthorizationConditionsReview{
		TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Response: resp,
	})
}
