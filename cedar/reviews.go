package cedar

import (
	"context"

	"github.com/kcedar/kcedar/internal/accessreview"
)

// The access reviews' wire types (API group authorization.kubernetes.io/v1,
// as kcedar's who-can command and its can-i rules listing send them).
type (
	// ResourceAccessReview asks who can perform an action; a
	// LocalResourceAccessReview asks within one namespace.
	ResourceAccessReview = accessreview.ResourceAccessReview
	// ResourceAccessReviewResponse lists the users and groups allowed, and
	// kcedar's entries: allowed, conditional and denied subjects with their
	// policies.
	ResourceAccessReviewResponse = accessreview.ResourceAccessReviewResponse
	// SubjectRulesReview asks what a subject can do in a namespace (every
	// namespace when empty); its answer is the same kind with the status.
	SubjectRulesReview = accessreview.SubjectRulesReview
	// ReviewError is a review that cannot be answered as it is.
	ReviewError = accessreview.RequestError
)

// ResourceAccessReview answers who can perform review's action: the
// subjects allowed without conditions, those allowed on conditions and
// those denied. An invalid review is a *ReviewError; a cancelled ctx stops
// it with ctx's error.
func (a *Authorizer) ResourceAccessReview(ctx context.Context, review *ResourceAccessReview) (*ResourceAccessReviewResponse, error) {
	e, err := a.engineNow()
	if err != nil {
		return nil, err
	}
	return accessreview.WhoCan(ctx, e, review)
}

// SubjectRulesReview answers what review's subject can do: every verb and
// resource of the schema, conditional rules with their conditions. An
// invalid review is a *ReviewError; a cancelled ctx stops it with ctx's
// error.
func (a *Authorizer) SubjectRulesReview(ctx context.Context, review *SubjectRulesReview) (*SubjectRulesReview, error) {
	e, err := a.engineNow()
	if err != nil {
		return nil, err
	}
	return accessreview.WhatCan(ctx, e, review)
}
