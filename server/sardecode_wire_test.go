package server

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestDecodeSARFastTakesAPIMachinerysEncoding: a SubjectAccessReview
// encoded as k8s.io/apiserver's webhook client encodes it (client-go's
// scheme codec for authorization.k8s.io/v1: metadata with a null
// creationTimestamp, an empty status) takes the fast path and decodes as
// encoding/json decodes it.
func TestDecodeSARFastTakesAPIMachinerysEncoding(t *testing.T) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:ns:sa", UID: "u", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=abc"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "list", Version: "v1", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1"}}}},
			LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}},
	}}
	body, err := runtime.Encode(scheme.Codecs.LegacyCodec(authorizationv1.SchemeGroupVersion), sar)
	if err != nil {
		t.Fatal(err)
	}
	var fast sarRequest
	if !decodeSARFast(body, &fast) {
		t.Fatalf("the fast path gives up on %s", body)
	}
	checkSameAsEncodingJSON(t, body, &fast)
	if fast.Spec.ResourceAttributes.FieldSelector.Requirements[0].Values[0] != "n1" || fast.Kind != "SubjectAccessReview" {
		t.Errorf("decoded %+v from %s", fast, body)
	}
}
