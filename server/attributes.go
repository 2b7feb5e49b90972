package server

import (
	"errors"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// checkSpec refuses a review no authorizer can decide: one with both or
// neither of resource and non-resource attributes, without a verb, or
// without a user and groups.
func checkSpec(spec *authorizationv1.SubjectAccessReviewSpec) error {
	var verb string
	switch {
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return errors.New("spec has both resourceAttributes and nonResourceAttributes")
	case spec.ResourceAttributes != nil:
		verb = spec.ResourceAttributes.Verb
	case spec.NonResourceAttributes != nil:
		verb = spec.NonResourceAttributes.Verb
	default:
		return errors.New("spec has neither resourceAttributes nor nonResourceAttributes")
	}
	if verb == "" {
		return errors.New("verb is empty")
	}
	if spec.User == "" && len(spec.Groups) == 0 {
		return errors.New("user and groups are empty")
	}
	return nil
}

// setAttributes fills a with spec as the attributes kube-apiserver hands an
// authorizer, its user in u: the inverse of the review k8s.io/apiserver's
// webhook authorizer builds from them. Selectors are their requirements, as
// kube-apiserver parsed them (a field requirement holds one value; a label
// requirement that does not parse is left out, and the first such error is
// the parsing error: a selector only narrows, so one left out asks about
// more, never less). A rawSelector is not read: kube-apiserver sends the
// requirements it parsed, and asks webhooks not to parse it again.
func setAttributes(a *authorizer.AttributesRecord, u *user.DefaultInfo, spec *authorizationv1.SubjectAccessReviewSpec) {
	u.Name, u.UID, u.Groups = spec.User, spec.UID, spec.Groups
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	a.User = u
	if na := spec.NonResourceAttributes; na != nil {
		a.Verb, a.Path = na.Verb, na.Path
		return
	}
	ra := spec.ResourceAttributes
	a.ResourceRequest = true
	a.Verb, a.Namespace, a.APIGroup, a.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
	a.Resource, a.Subresource, a.Name = ra.Resource, ra.Subresource, ra.Name
	if fs := ra.FieldSelector; fs != nil {
		a.FieldSelectorRequirements = fieldRequirements(fs.Requirements)
	}
	if ls := ra.LabelSelector; ls != nil {
		a.LabelSelectorRequirements, a.LabelSelectorParsingErr = labelRequirements(ls.Requirements)
	}
}

// fieldRequirements are a review's field selector requirements as parsed
// ones: a single value In is "=", NotIn "!=" (fields.Requirement holds one
// value; others are left out).
func fieldRequirements(reqs []metav1.FieldSelectorRequirement) fields.Requirements {
	var out fields.Requirements
	for _, r := range reqs {
		if len(r.Values) != 1 {
			continue
		}
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			out = append(out, fields.Requirement{Operator: selection.Equals, Field: r.Key, Value: r.Values[0]})
		case metav1.FieldSelectorOpNotIn:
			out = append(out, fields.Requirement{Operator: selection.NotEquals, Field: r.Key, Value: r.Values[0]})
		}
	}
	return out
}

// labelOperators maps a review's label selector operators to parsed ones.
var labelOperators = map[metav1.LabelSelectorOperator]selection.Operator{
	metav1.LabelSelectorOpIn: selection.In, metav1.LabelSelectorOpNotIn: selection.NotIn,
	metav1.LabelSelectorOpExists: selection.Exists, metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist,
}

// labelRequirements are a review's label selector requirements as parsed
// ones, in order; the first that does not validate is the parsing error.
func labelRequirements(reqs []metav1.LabelSelectorRequirement) (labels.Requirements, error) {
	var out labels.Requirements
	var first error
	for _, r := range reqs {
		op, ok := labelOperators[r.Operator]
		if !ok {
			continue
		}
		// NewRequirement returns the requirement with its error: one that
		// does not validate is kept as the review carries it, and its
		// error reported.
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil && first == nil {
			first = err
		}
		out = append(out, *req)
	}
	return out, first
}

// decidedName is the name and namespace a review asks about, for the
// decision log and traces: its own, or where they are open, those its
// field selector names (metadata.name or metadata.namespace In one value
// that is not empty), as kcedar decides it.
func decidedName(ra *authorizationv1.ResourceAttributes) (namespace, name string) {
	namespace, name = ra.Namespace, ra.Name
	if ra.FieldSelector == nil {
		return namespace, name
	}
	for _, r := range ra.FieldSelector.Requirements {
		if r.Operator != metav1.FieldSelectorOpIn || len(r.Values) != 1 || r.Values[0] == "" {
			continue
		}
		switch {
		case r.Key == "metadata.name" && name == "":
			name = r.Values[0]
		case r.Key == "metadata.namespace" && namespace == "":
			namespace = r.Values[0]
		}
	}
	return namespace, name
}
