package server

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
)

// The handlers take what they serve through these interfaces, which
// cedar.Authorizer implements; k8s.io/apiserver's authorizer.Authorizer
// (a union holding kcedar's, say) is a ConditionsEvaluator too.

// ConditionsEvaluator evaluates the conditions of a decision against the
// admission request they were issued for: the conditions callback.
// authorizer.Authorizer and residual.Evaluator are ConditionsEvaluators.
type ConditionsEvaluator interface {
	EvaluateConditions(ctx context.Context, decision authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error)
}

// AdmissionEnforcer decides for a cluster without conditional
// authorization whose admission webhook (an Admitter) enforces the
// authorizer's allow conditions: AuthorizeEnforced is Allow, enforced, for
// a decision only allow conditions leave open when admission webhooks see
// the request, and the authorizer's unconditional decision otherwise.
type AdmissionEnforcer interface {
	AuthorizeEnforced(ctx context.Context, attrs authorizer.Attributes) (decision authorizer.Decision, reason string, enforced bool, err error)
}

// Admitter decides an admission request by the conditions its
// AdmissionEnforcer left to admission: allowed, or refused with reason.
type Admitter interface {
	Admit(ctx context.Context, request *admissionv1.AdmissionRequest) (allowed bool, reason string, err error)
}

// Reviewer answers the access reviews: who can make a request, and what a
// subject can do. An invalid review is a *cedar.ReviewError.
type Reviewer interface {
	// ResourceAccessReview answers who can make review's request.
	ResourceAccessReview(ctx context.Context, review *cedar.ResourceAccessReview) (*cedar.ResourceAccessReviewResponse, error)
	// SubjectRulesReview answers what review's subject can do.
	SubjectRulesReview(ctx context.Context, review *cedar.SubjectRulesReview) (*cedar.SubjectRulesReview, error)
}

var (
	_ ConditionsEvaluator = (*cedar.Authorizer)(nil)
	_ AdmissionEnforcer   = (*cedar.Authorizer)(nil)
	_ Admitter            = (*cedar.Authorizer)(nil)
	_ Reviewer            = (*cedar.Authorizer)(nil)
)
