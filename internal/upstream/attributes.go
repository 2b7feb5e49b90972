package upstream

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/entities"
)

// Request is a as kcedar's request: the SubjectAccessReview spec that
// k8s.io/apiserver's webhook authorizer builds from a, then
// entities.RequestFromSAR, so an embedded authorizer and the webhook decide
// the same request. Selector requirements with operators the review cannot
// carry are dropped, as the webhook drops them (only narrowing is lost).
func Request(a authorizer.Attributes) (*entities.Request, error) {
	spec := &authorizationv1.SubjectAccessReviewSpec{}
	if u := a.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
			for k, v := range extra {
				spec.Extra[k] = v
			}
		}
	}
	if !a.IsResourceRequest() {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
		return entities.RequestFromSAR(spec)
	}
	ra := &authorizationv1.ResourceAttributes{
		Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
		Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
	}
	if reqs := fieldRequirements(a); len(reqs) > 0 {
		ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: reqs}
	}
	if reqs := labelRequirements(a); len(reqs) > 0 {
		ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: reqs}
	}
	spec.ResourceAttributes = ra
	return entities.RequestFromSAR(spec)
}

// fieldRequirements are a's field selector requirements a review carries:
// equality and inequality (a parse error keeps what parsed; selectors only
// narrow).
func fieldRequirements(a authorizer.Attributes) []metav1.FieldSelectorRequirement {
	parsed, _ := a.GetFieldSelector()
	var out []metav1.FieldSelectorRequirement
	for _, r := range parsed {
		op := metav1.FieldSelectorOpIn
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: r.Field, Operator: op, Values: []string{r.Value}})
	}
	return out
}

// labelSelectorOps maps the label selector operators a review carries.
var labelSelectorOps = map[selection.Operator]metav1.LabelSelectorOperator{
	selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
	selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
	selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
}

// labelRequirements are a's label selector requirements a review carries.
func labelRequirements(a authorizer.Attributes) []metav1.LabelSelectorRequirement {
	parsed, _ := a.GetLabelSelector()
	var out []metav1.LabelSelectorRequirement
	for _, r := range parsed {
		op, ok := labelSelectorOps[r.Operator()]
		if !ok {
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			req.Values = values
		}
		out = append(out, req)
	}
	return out
}
