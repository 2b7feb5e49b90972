package entities

import (
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestFromSARLabelSelector(t *testing.T) {
	reqs := []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"agent"}},
		{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist},
	}
	spec := &authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: &authorizationv1.ResourceAttributes{
		Verb: "list", Resource: "pods", LabelSelector: &authorizationv1.LabelSelectorAttributes{RawSelector: "app=agent,!tier", Requirements: reqs}}}
	r, err := RequestFromSAR(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []LabelRequirement{{Key: "app", Op: metav1.LabelSelectorOpIn, Values: []string{"agent"}}, {Key: "tier", Op: metav1.LabelSelectorOpDoesNotExist}}
	if !reflect.DeepEqual(r.LabelSelector, want) {
		t.Fatalf("label selector %+v, want %+v", r.LabelSelector, want)
	}
	// Changing the SAR afterwards does not change the request.
	reqs[0].Values[0] = "web"
	if r.LabelSelector[0].Values[0] != "agent" {
		t.Fatal("the request shares the SAR's values")
	}
	spec.ResourceAttributes.LabelSelector = &authorizationv1.LabelSelectorAttributes{RawSelector: "app=agent"}
	if r, _ := RequestFromSAR(spec); r.LabelSelector != nil {
		t.Fatalf("a raw selector alone is not parsed: %+v", r.LabelSelector)
	}
}
