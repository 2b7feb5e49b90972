package entities

import (
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestFromSARResource(t *testing.T) {
	spec := &authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"a", "b"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "update", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale",
			Namespace: "team-a", Name: "web",
		},
	}
	r, err := RequestFromSAR(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := &Request{
		User:            UserInfo{Name: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a", "b"}}},
		Verb:            "update",
		ResourceRequest: true,
		APIGroup:        "apps", APIVersion: "v1", Resource: "deployments", Subresource: "scale",
		Namespace: "team-a", Name: "web",
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	// The extra map is a copy.
	spec.Extra["scopes"] = authorizationv1.ExtraValue{"changed"}
	spec.Extra["new"] = authorizationv1.ExtraValue{"x"}
	if len(r.User.Extra) != 1 || r.User.Extra["scopes"][0] != "a" {
		t.Fatalf("extra shares the spec's map: %v", r.User.Extra)
	}
	for _, s := range []string{`user="alice"`, `verb="update"`, `group="apps"`, `resource="deployments"`, `subresource="scale"`, `namespace="team-a"`, `name="web"`} {
		if !strings.Contains(r.String(), s) {
			t.Errorf("String() = %s, missing %s", r, s)
		}
	}
}

func TestRequestFromSARNonResource(t *testing.T) {
	r, err := RequestFromSAR(&authorizationv1.SubjectAccessReviewSpec{
		User: "scraper", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/metrics"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.ResourceRequest || r.Verb != "get" || r.Path != "/metrics" || r.Resource != "" || r.User.Extra != nil {
		t.Fatalf("got %+v", r)
	}
	if s := r.String(); !strings.Contains(s, `path="/metrics"`) || strings.Contains(s, "resource=") {
		t.Fatalf("String() = %s", s)
	}
	// Groups alone identify a requester.
	if _, err := RequestFromSAR(&authorizationv1.SubjectAccessReviewSpec{
		Groups: []string{"system:unauthenticated"}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"},
	}); err != nil {
		t.Fatalf("groups without a user: %v", err)
	}
}

func TestRequestFromSARInvalid(t *testing.T) {
	ra := &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}
	nra := &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/x"}
	for _, tc := range []struct {
		name string
		spec *authorizationv1.SubjectAccessReviewSpec
		want string
	}{
		{"no spec", nil, "spec is missing"},
		{"neither", &authorizationv1.SubjectAccessReviewSpec{User: "a"}, "neither"},
		{"both", &authorizationv1.SubjectAccessReviewSpec{User: "a", ResourceAttributes: ra, NonResourceAttributes: nra}, "both"},
		{"no verb", &authorizationv1.SubjectAccessReviewSpec{User: "a", ResourceAttributes: &authorizationv1.ResourceAttributes{Resource: "pods"}}, "verb is empty"},
		{"no non-resource verb", &authorizationv1.SubjectAccessReviewSpec{User: "a", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/x"}}, "verb is empty"},
		{"no user", &authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: ra}, "user and groups are empty"},
		{"no user, empty groups", &authorizationv1.SubjectAccessReviewSpec{Groups: []string{}, NonResourceAttributes: nra}, "user and groups are empty"},
	} {
		if r, err := RequestFromSAR(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %+v, %v; want an error with %q", tc.name, r, err, tc.want)
		}
	}
}

func TestRequestFromSARFieldSelectors(t *testing.T) {
	req := func(op metav1.FieldSelectorOperator, key string, values ...string) metav1.FieldSelectorRequirement {
		return metav1.FieldSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	in, notIn := metav1.FieldSelectorOpIn, metav1.FieldSelectorOpNotIn
	for _, tc := range []struct {
		name          string
		namespace     string
		objName       string
		reqs          []metav1.FieldSelectorRequirement
		wantNamespace string
		wantName      string
	}{
		{"name In one value narrows an open name", "team-a", "", []metav1.FieldSelectorRequirement{req(in, "metadata.name", "web")}, "team-a", "web"},
		{"namespace In one value narrows an open namespace", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.namespace", "team-b")}, "team-b", ""},
		{"both at once", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.namespace", "team-b"), req(in, "metadata.name", "web")}, "team-b", "web"},
		{"an explicit name stays", "team-a", "db", []metav1.FieldSelectorRequirement{req(in, "metadata.name", "web")}, "team-a", "db"},
		{"an explicit namespace stays", "team-a", "", []metav1.FieldSelectorRequirement{req(in, "metadata.namespace", "team-b")}, "team-a", ""},
		{"the first of two names wins", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.name", "a"), req(in, "metadata.name", "b")}, "", "a"},
		{"NotIn does not narrow", "", "", []metav1.FieldSelectorRequirement{req(notIn, "metadata.name", "web"), req(notIn, "metadata.namespace", "x")}, "", ""},
		{"Exists does not narrow", "", "", []metav1.FieldSelectorRequirement{req(metav1.FieldSelectorOpExists, "metadata.name")}, "", ""},
		{"DoesNotExist does not narrow", "", "", []metav1.FieldSelectorRequirement{req(metav1.FieldSelectorOpDoesNotExist, "metadata.name")}, "", ""},
		{"several values do not narrow", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.name", "a", "b"), req(in, "metadata.namespace", "a", "b")}, "", ""},
		{"no values do not narrow", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.name")}, "", ""},
		{"an empty value does not narrow", "", "", []metav1.FieldSelectorRequirement{req(in, "metadata.name", "")}, "", ""},
		{"other fields do not narrow", "", "", []metav1.FieldSelectorRequirement{req(in, "spec.nodeName", "n1"), req(in, "name", "x"), req(in, "namespace", "y")}, "", ""},
	} {
		spec := &authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "list", Resource: "pods", Namespace: tc.namespace, Name: tc.objName,
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: tc.reqs},
		}}
		r, err := RequestFromSAR(spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Namespace != tc.wantNamespace || r.Name != tc.wantName {
			t.Errorf("%s: namespace %q name %q, want %q %q", tc.name, r.Namespace, r.Name, tc.wantNamespace, tc.wantName)
		}
	}

	// A raw selector is not parsed (kube-apiserver sends requirements), and
	// label selectors change nothing.
	spec := &authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
		Verb: "list", Resource: "pods",
		FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "metadata.name=web"},
		LabelSelector: &authorizationv1.LabelSelectorAttributes{
			RawSelector: "app=web",
			Requirements: []metav1.LabelSelectorRequirement{
				{Key: "metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
				{Key: "metadata.namespace", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a"}},
			},
		},
	}}
	r, err := RequestFromSAR(spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "" || r.Namespace != "" {
		t.Fatalf("selectors narrowed to namespace %q name %q", r.Namespace, r.Name)
	}
}

// The unconditional-only key is a request to kcedar, not part of the user:
// it is taken out of the extra policies see.
func TestUnconditionalOnlyExtra(t *testing.T) {
	spec := &authorizationv1.SubjectAccessReviewSpec{User: "lead", Extra: map[string]authorizationv1.ExtraValue{
		UnconditionalOnlyExtra: {"true"}, "team": {"a"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}
	r, err := RequestFromSAR(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !r.UnconditionalOnly || len(r.User.Extra) != 1 || r.User.Extra["team"][0] != "a" {
		t.Fatalf("%+v", r)
	}
	delete(spec.Extra, "team")
	if r, _ = RequestFromSAR(spec); !r.UnconditionalOnly || r.User.Extra != nil {
		t.Fatalf("%+v", r)
	}
	delete(spec.Extra, UnconditionalOnlyExtra)
	if r, _ = RequestFromSAR(spec); r.UnconditionalOnly {
		t.Fatalf("%+v", r)
	}
}
