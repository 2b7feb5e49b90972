package cedar

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/upstream"
)

// Admit decides an admission request on a cluster without conditional
// authorization, where AuthorizeEnforced answered a conditional allow
// Allow: the conditions of every verb the operation may have been
// authorized as are computed again and evaluated against the request's
// objects. It allows unless one of them does not hold; reason says why not,
// with any evaluation error. The error is ErrNotLoaded before a policy set
// is loaded.
func (a *Authorizer) Admit(ctx context.Context, request *admissionv1.AdmissionRequest) (allowed bool, reason string, err error) {
	e, err := a.engineNow()
	if err != nil {
		return false, cannotDecide, err
	}
	v := e.Admit(ctx, upstream.AdmissionRequestData(request))
	detailsOf(ctx).fill(v, &engine.Stats{}, e.Generation())
	return v.IsAllowed(), upstream.ReasonWithError(v.Reason(), v.EvaluationError()), nil
}
