package server

import (
	"errors"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/cedar"
)

var admissionReviewType = typeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}

// admissionHandler is the validating admission webhook that enforces
// conditions on clusters without conditional authorization: a decides.
func (e *endpoint) admissionHandler(a Admitter) http.Handler {
	e.metrics.countBadRequestsOf("admit")
	return e.webhook("admit", func(w http.ResponseWriter, r *http.Request) { e.serveAdmit(w, r, a) })
}

func (e *endpoint) serveAdmit(w http.ResponseWriter, r *http.Request, a Admitter) {
	var review admissionv1.AdmissionReview
	if !e.decodeWebhook(w, r, "admit", &review, func() error {
		return checkType(typeMeta{review.APIVersion, review.Kind}, admissionReviewType)
	}) {
		return
	}
	if review.Request == nil {
		e.writeError(w, "admit", badRequest("request is missing"))
		return
	}
	start := time.Now()
	details := new(cedar.Details)
	allowed, reason, err := a.Admit(cedar.WithDetails(r.Context(), details), review.Request)
	if errors.Is(err, cedar.ErrNotLoaded) {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		allowed, reason = false, reason+" ("+err.Error()+")"
	}
	label := "Deny"
	if allowed {
		label = "Allow"
	}
	e.metrics.decisionDuration.WithLabelValues("admit").Observe(time.Since(start).Seconds())
	e.metrics.decisions.WithLabelValues("admit", label).Inc()
	traceAdmit(e.recordingSpan(r.Context()), review.Request, label, details)
	writeJSON(w, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewType.APIVersion, Kind: admissionReviewType.Kind},
		Response: admissionResponse(allowed, reason, review.Request.UID)})
}
