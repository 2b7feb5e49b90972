package server

import (
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
)

var sarType = typeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}

// sarRequest is the part of a SubjectAccessReview kcedar reads, decoded in one pass.
type sarRequest struct {
	typeMeta
	Spec authorizationv1.SubjectAccessReviewSpec `json:"spec"`
}

// sarResponse is the SubjectAccessReview kube-apiserver reads back: only the
// status matters to it.
type sarResponse struct {
	APIVersion string                                    `json:"apiVersion"`
	Kind       string                                    `json:"kind"`
	Status     authorizationv1.SubjectAccessReviewStatus `json:"status"`
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
	req, err := cedar.RequestFromSAR(&sar.Spec)
	if err != nil {
		s.writeError(w, "authorize", badRequest("invalid SubjectAccessReview: %v", err))
		return
	}
	ps := s.store.Current()
	if ps == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	az := residual.Authorizer{Schema: s.Schema(), Policies: ps}
	out := az.Authorize(req, residual.Options{}).Fold()
	s.metrics.decisionDuration.WithLabelValues("authorize").Observe(time.Since(start).Seconds())
	s.metrics.decisions.WithLabelValues("authorize", out.Decision.String()).Inc()
	writeJSON(w, sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: statusFor(out)})
}

// statusFor renders an unconditional outcome as a SubjectAccessReview status.
func statusFor(out residual.Outcome) authorizationv1.SubjectAccessReviewStatus {
	var st authorizationv1.SubjectAccessReviewStatus
	switch out.Decision {
	case cedar.Allow:
		st.Allowed = true
		st.Reason = "kcedar: allowed by " + describePolicies(out.Policies)
	case cedar.Deny:
		st.Denied = true
		st.Reason = "kcedar: denied by " + describePolicies(out.Policies)
	default:
		st.Reason = "kcedar: no policy applies"
	}
	if len(out.Errors) > 0 {
		st.EvaluationError = strings.Join(out.Errors, "; ")
	}
	return st
}

// describePolicies names the policies and their @reason annotations.
func describePolicies(ps []*cedar.Policy) string {
	if len(ps) == 0 {
		return "policy"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		if p.Reason != "" {
			parts[i] = "policy " + p.ID + " (" + p.Reason + ")"
		} else {
			parts[i] = "policy " + p.ID
		}
	}
	return strings.Join(parts, ", ")
}
