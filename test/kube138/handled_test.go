package kube138

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/operation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	authorizationvalidation "k8s.io/apiserver/pkg/apis/authorization/validation"
)

// allDecisionTypes are the decision types a caller may say it handles.
var allDecisionTypes = []authorizationv1.ConditionsAwareDecisionType{
	authorizationv1.ConditionsAwareDecisionTypeAllow, authorizationv1.ConditionsAwareDecisionTypeDeny,
	authorizationv1.ConditionsAwareDecisionTypeNoOpinion, authorizationv1.ConditionsAwareDecisionTypeConditionsMap,
	authorizationv1.ConditionsAwareDecisionTypeUnion,
}

// TestHandledDecisionTypes: kcedar answers conditions exactly to the
// callers upstream counts as conditions-aware
// (authorizationv1.SupportsConditionalAuthorization: all of Allow, Deny,
// NoOpinion, ConditionsMap and Union), and folds them for every other
// caller (Deny where a deny condition exists, else NoOpinion); every answer
// passes upstream's validation of a status for that caller. Every subset of
// the five types is tried, with and without a type upstream does not know,
// on a request with allow conditions only and one with deny conditions too.
func TestHandledDecisionTypes(t *testing.T) {
	enableConditionalAuthorization(t)
	k := startKcedar(t, []string{"testdata/generated/conditional.cedar"})
	requests := []struct {
		name   string
		folded string
		spec   authorizationv1.SubjectAccessReviewSpec
	}{
		{"allow conditions only", "NoOpinion", writeSpec("dev-1", "team-1", "create", "configmaps")},
		{"deny conditions too", "Deny", writeSpec("dev-1", "team-1", "create", "pods")},
	}
	for _, r := range requests {
		var wrong []string
		first := ""
		for _, opts := range handledDecisionTypeVariants() {
			spec := r.spec
			spec.AuthorizationOptions = opts
			var got authorizationv1.SubjectAccessReview
			k.post(t, "/v1/authorize", authorizationv1.SubjectAccessReview{TypeMeta: sarType, Spec: spec}, &got)
			if msg := checkHandledAnswer(spec, got.Status, r.folded); msg != "" {
				name := "no authorizationOptions"
				if opts != nil {
					name = fmt.Sprintf("%v", opts.HandledDecisionTypes)
				}
				wrong = append(wrong, name)
				if first == "" {
					status, _ := json.Marshal(got.Status)
					first = fmt.Sprintf("handledDecisionTypes %s: %s\n  status: %s", name, msg, status)
				}
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%s: %d callers answered wrong, first %s\n  all: %s", r.name, len(wrong), first, strings.Join(wrong, ", "))
		}
	}
}

var sarType = metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}

// writeSpec is a review of a write of resource in ns-1 by user in group.
func writeSpec(user, group, verb, resource string) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{group, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns-1", Verb: verb, Version: "v1", Resource: resource}}
}

// handledDecisionTypeVariants are no options, every subset of the five
// types, and each subset with an unknown type added.
func handledDecisionTypeVariants() []*authorizationv1.AuthorizationOptions {
	out := []*authorizationv1.AuthorizationOptions{nil}
	for mask := range 1 << len(allDecisionTypes) {
		var types []authorizationv1.ConditionsAwareDecisionType
		for i, dt := range allDecisionTypes {
			if mask&(1<<i) != 0 {
				types = append(types, dt)
			}
		}
		out = append(out, &authorizationv1.AuthorizationOptions{HandledDecisionTypes: types},
			&authorizationv1.AuthorizationOptions{HandledDecisionTypes: append(types[:len(types):len(types)], "FutureType")})
	}
	return out
}

// checkHandledAnswer checks the answer to a caller with spec's options: a
// conditional answer exactly when upstream counts the caller
// conditions-aware, else the folded decision; and upstream's validation of
// the status for that caller.
func checkHandledAnswer(spec authorizationv1.SubjectAccessReviewSpec, st authorizationv1.SubjectAccessReviewStatus, folded string) string {
	aware := authorizationv1.SupportsConditionalAuthorization(spec.AuthorizationOptions)
	errs := authorizationvalidation.ValidateSubjectAccessReviewStatus(st, aware, field.NewPath("status"))
	op := operation.Operation{Type: operation.Create, Options: authorizationvalidation.DeclarativeValidationConfig().Options}
	errs = append(errs, authorizationv1.Validate_SubjectAccessReviewStatus(context.Background(), op, field.NewPath("status"), &st, nil)...)
	switch {
	case len(errs) > 0:
		return fmt.Sprintf("upstream validation (conditions-aware caller: %v): %v", aware, errs.ToAggregate())
	case aware && st.ConditionalDecision == nil:
		return "a conditions-aware caller got no conditions"
	case aware:
		return ""
	case st.ConditionalDecision != nil:
		return "a caller that does not handle conditions got a conditional decision"
	}
	got := "NoOpinion"
	if st.Allowed {
		got = "Allow"
	} else if st.Denied {
		got = "Deny"
	}
	if got != folded {
		return fmt.Sprintf("folded to %s, want %s", got, folded)
	}
	return ""
}
