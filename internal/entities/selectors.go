package entities

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelRequirement is one requirement of a request's label selector, as
// kube-apiserver parses it for authorizers (KEP-4601): Op is In, NotIn,
// Exists or DoesNotExist (`=` and `==` arrive as In with one value, `!=` as
// NotIn).
type LabelRequirement struct {
	Key    string
	Op     metav1.LabelSelectorOperator
	Values []string
}

// labelSelectorOf copies a SubjectAccessReview's parsed label selector
// requirements (the raw selector is not parsed: kube-apiserver sends the
// requirements it parsed).
func labelSelectorOf(ls *authorizationv1.LabelSelectorAttributes) []LabelRequirement {
	if ls == nil || len(ls.Requirements) == 0 {
		return nil
	}
	out := make([]LabelRequirement, len(ls.Requirements))
	for i, r := range ls.Requirements {
		out[i] = LabelRequirement{Key: r.Key, Op: r.Operator, Values: append([]string(nil), r.Values...)}
	}
	return out
}
