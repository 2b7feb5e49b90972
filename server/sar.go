package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
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

// sarHandler answers SubjectAccessReviews with one authorizer, whatever it
// is: kcedar's, a union holding it, a decorator.
type sarHandler struct {
	*endpoint
	authz    authorizer.Authorizer
	enforcer AdmissionEnforcer // nil: no admission enforcement
	// webhookSees: the admission webhook that enforces conditional allows
	// sees the user's writes.
	webhookSees func(username string, groups []string) bool
	// aggregated: a group version may be served by an aggregated API
	// server, whose requests kube-apiserver's admission never sees.
	aggregated func(group, version string) bool
}

func (e *endpoint) sarHandler(authz authorizer.Authorizer, opts Options) http.Handler {
	h := &sarHandler{endpoint: e, authz: authz, enforcer: opts.AdmissionEnforcer, webhookSees: opts.AdmissionWebhookSees, aggregated: opts.AggregatedAPI}
	if h.webhookSees == nil {
		h.webhookSees = func(string, []string) bool { return false }
	}
	if h.aggregated == nil {
		h.aggregated = func(string, string) bool { return true }
	}
	e.metrics.countBadRequestsOf("authorize")
	return e.webhook("authorize", h.serve)
}

// review is one SubjectAccessReview in the handler: the review decoded,
// the attributes handed to the authorizer, their user, and the Details the
// authorizer fills, in one allocation.
type review struct {
	sar     sarRequest
	attrs   authorizer.AttributesRecord
	user    user.DefaultInfo
	details cedar.Details
}

// serve answers a SubjectAccessReview: decode, the review as attributes,
// one call to the authorizer for what the caller takes, the answer
// rendered; then metrics, the decision log, the trace and the response.
func (h *sarHandler) serve(w http.ResponseWriter, r *http.Request) {
	rv := new(review)
	if !h.decodeWebhook(w, r, "authorize", &rv.sar, func() error { return checkType(rv.sar.typeMeta, sarType) }) {
		return
	}
	spec := &rv.sar.Spec
	if spec.UnsupportedConditionalAuthorization != nil {
		h.writeError(w, "authorize", badRequest("spec.conditionalAuthorization is not a Kubernetes field (an early KEP-5681 proposal): "+
			"ask for conditions with spec.authorizationOptions.handledDecisionTypes [Allow, Deny, NoOpinion, ConditionsMap, Union], as Kubernetes 1.38 does"))
		return
	}
	if err := checkSpec(&spec.SubjectAccessReviewSpec); err != nil {
		h.writeError(w, "authorize", badRequest("invalid SubjectAccessReview: %v", err))
		return
	}
	setAttributes(&rv.attrs, &rv.user, &spec.SubjectAccessReviewSpec)
	ctx := cedar.WithDetails(r.Context(), &rv.details)
	start := time.Now()
	answer, err := h.decide(ctx, &rv.attrs, spec, &rv.details)
	if errors.Is(err, cedar.ErrNotLoaded) {
		// 503, not a Deny: the API server retries, and caches nothing.
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	took := time.Since(start)
	h.metrics.authorizeDuration().Observe(took.Seconds())
	h.metrics.authorizeDecisions.get(answer.Label).Inc()
	h.metrics.observeCache(rv.details.Cache)
	for _, a := range rv.details.Audit {
		h.metrics.auditDecisions.WithLabelValues(a.Effect, a.Would).Inc()
	}
	h.logDecision(spec, answer, &rv.details, took)
	traceAuthorize(h.recordingSpan(r.Context()), spec, answer, &rv.details)
	writeSARResponse(w, answer.Status)
}

// decide asks the authorizer what the caller of spec takes: the decision
// with its conditions for a caller that handles every decision type of
// conditional authorization (upstream requires it: k8s.io/api
// authorization/v1 SupportsConditionalAuthorization); with admission
// enforcement, the enforced decision for a user the webhook sees, on a
// group version the API server serves itself; else the unconditional
// decision. The error is the authorizer's, for a decision it could not
// make.
func (h *sarHandler) decide(ctx context.Context, attrs authorizer.Attributes, spec *wire.SubjectAccessReviewSpec, details *cedar.Details) (sarAnswer, error) {
	if spec.AuthorizationOptions.SupportsConditions() {
		d := h.authz.ConditionsAwareAuthorize(ctx, attrs)
		return conditionsAnswer(d), d.Error()
	}
	var t authorizer.Decision
	var reason string
	var err error
	if h.enforcer != nil && h.webhookSees(spec.User, spec.Groups) && !h.aggregated(attrs.GetAPIGroup(), attrs.GetAPIVersion()) {
		var enforced bool
		if t, reason, enforced, err = h.enforcer.AuthorizeEnforced(ctx, attrs); enforced && err == nil {
			return enforcedAnswer(reason), nil
		}
	} else {
		t, reason, err = h.authz.Authorize(ctx, attrs)
	}
	// A policy's evaluation error is part of kcedar's decision (Details),
	// not an error of the authorizer.
	evaluationError := strings.Join(details.Errors, "; ")
	if err != nil {
		evaluationError = err.Error()
	}
	return plainAnswer(t, reason, evaluationError), err
}
