package server

import (
	"net/http"
	"time"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

var sarType = typeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}

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

// handleAuthorize answers a SubjectAccessReview: decode, map to a request,
// one call to the engine, which decides and renders the answer for what the
// caller takes; then metrics, the decision log and the response.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	var sar sarRequest
	if !s.decodeWebhook(w, r, "authorize", &sar, func() error { return checkType(sar.typeMeta, sarType) }) {
		return
	}
	if sar.Spec.UnsupportedConditionalAuthorization != nil {
		s.writeError(w, "authorize", badRequest("spec.conditionalAuthorization is not a Kubernetes field (an early KEP-5681 proposal): "+
			"ask for conditions with spec.authorizationOptions.handledDecisionTypes [Allow, Deny, NoOpinion, ConditionsMap, Union], as Kubernetes 1.38 does"))
		return
	}
	req, err := entities.RequestFromSAR(&sar.Spec.SubjectAccessReviewSpec)
	if err != nil {
		s.writeError(w, "authorize", badRequest("invalid SubjectAccessReview: %v", err))
		return
	}
	if s.serving == nil {
		s.authorizeUpstream(r.Context(), w, &sar.Spec, req)
		return
	}
	e := s.engineOr503(w)
	if e == nil {
		return
	}
	span := s.recordingSpan(r.Context())
	stats := new(engine.Stats)
	start := time.Now()
	answer := authorizeSubjectAccessReview(r.Context(), e, req, s.sarCaller(&sar.Spec), stats)
	s.metrics.authorizeDuration().Observe(time.Since(start).Seconds())
	s.metrics.authorizeDecisions.get(answer.Label).Inc()
	s.metrics.observeCache(stats.Cache)
	audit := engine.AuditReports(answer.Decision)
	for _, a := range audit {
		s.metrics.auditDecisions.WithLabelValues(a.Effect, a.Would).Inc()
	}
	s.logDecision(req, answer, audit, e.Generation(), time.Since(start))
	traceAuthorize(span, req, answer, stats, e.Generation())
	writeSARResponse(w, answer.Status)
}

// sarCaller is what the caller of spec can take. Conditions go only to a
// caller that handles every decision type of conditional authorization, as
// upstream requires (k8s.io/api authorization/v1
// SupportsConditionalAuthorization).
func (s *Server) sarCaller(spec *wire.SubjectAccessReviewSpec) sarCaller {
	return sarCaller{
		Upstream:          spec.AuthorizationOptions.SupportsConditions(),
		AdmissionEnforced: s.enforce && s.webhookSees(spec.User, spec.Groups),
		MayBeAggregated:   s.aggregated,
	}
}
