package schemagen

import (
	"slices"
	"strings"
	"testing"
)

// TestResolveEveryResource: every form kubectl accepts for every resource of
// the embedded schema resolves back to that resource: group-qualified forms
// exactly, unqualified ones to it or, when another group has the same name,
// to a preferred one that lists it in Others.
func TestResolveEveryResource(t *testing.T) {
	s := defaultSchema(t)
	checked := 0
	for _, k := range s.SortedResourceKeys() {
		r := s.Resources[k]
		if k.Subresource != "" || r.AnySubresource {
			continue
		}
		if !r.Virtual && (r.Names.Singular == "" || r.Names.Kind == "" || r.Names.Version == "") {
			t.Errorf("%v: discovery names missing: %+v", k, r.Names)
		}
		forms := []string{k.Resource, strings.ToUpper(k.Resource)}
		if r.Names.Singular != "" {
			forms = append(forms, r.Names.Singular)
		}
		forms = append(forms, r.Names.ShortNames...)
		if r.Names.Kind != "" {
			forms = append(forms, r.Names.Kind, strings.ToLower(r.Names.Kind))
		}
		var qualified []string
		if k.Group != "" {
			for _, f := range forms {
				qualified = append(qualified, f+"."+k.Group)
				if r.Names.Version != "" {
					qualified = append(qualified, f+"."+r.Names.Version+"."+k.Group)
				}
			}
		}
		group := k.Group
		if group == "" {
			group = "core"
		}
		check := func(arg, apiGroup string, exact bool) {
			checked++
			got, err := s.ResolveResource(arg, apiGroup)
			if err != nil {
				t.Errorf("%v: ResolveResource(%q, %q): %v", k, arg, apiGroup, err)
				return
			}
			if got.Key == k {
				if got.Version != r.Names.Version {
					t.Errorf("%v: %q resolved to version %q, want %q", k, arg, got.Version, r.Names.Version)
				}
				return
			}
			if exact || !slices.Contains(got.Others, k) {
				t.Errorf("%v: ResolveResource(%q, %q) = %v (others %v)", k, arg, apiGroup, got.Key, got.Others)
			}
		}
		for _, f := range forms {
			check(f, "", false)
			check(f, group, true) // --api-group picks it
		}
		for _, f := range qualified {
			check(f, "", true)
		}
		// Its subresources, through every form.
		for _, sk := range s.SortedResourceKeys() {
			if sk.Group != k.Group || sk.Resource != k.Resource || sk.Subresource == "" {
				continue
			}
			for _, f := range append([]string{k.Resource}, qualified...) {
				checked++
				got, err := s.ResolveResource(f+"/"+sk.Subresource, group)
				if err != nil || got.Key != sk || got.Subresource != sk.Subresource {
					t.Errorf("%v: ResolveResource(%q) = %+v, %v", sk, f+"/"+sk.Subresource, got, err)
				}
			}
		}
	}
	if checked < 1000 {
		t.Errorf("only %d forms checked", checked)
	}
	t.Logf("%d forms resolved", checked)
}

func TestResolveExamples(t *testing.T) {
	s := defaultSchema(t)
	for _, tc := range []struct{ arg, group, want, gvr string }{
		{"pods", "", "core::pods", "v1 pods"},
		{"po", "", "core::pods", "v1 pods"},
		{"pod", "", "core::pods", "v1 pods"},
		{"Pod", "", "core::pods", "v1 pods"},
		{"deployments", "", "apps::deployments", "apps/v1 deployments"},
		{"deployments.apps", "", "apps::deployments", "apps/v1 deployments"},
		{"deployments.v1.apps", "", "apps::deployments", "apps/v1 deployments"},
		{"pods/exec", "", "core::pods_exec", "v1 pods/exec"},
		{"deploy/scale", "", "apps::deployments_scale", "apps/v1 deployments/scale"},
		{"events", "", "core::events", "v1 events"},
		{"events", "events.k8s.io", "io::k8s::events::events", "events.k8s.io/v1 events"},
		{"userextras/scopes", "", "io::k8s::authentication::userextras", "authentication.k8s.io userextras/scopes"},
	} {
		got, err := s.ResolveResource(tc.arg, tc.group)
		if err != nil {
			t.Errorf("%q: %v", tc.arg, err)
			continue
		}
		if string(got.EntityType) != tc.want || got.GroupVersionResource() != tc.gvr {
			t.Errorf("%q: %s (%s), want %s (%s)", tc.arg, got.EntityType, got.GroupVersionResource(), tc.want, tc.gvr)
		}
	}
	for _, tc := range []struct{ arg, group, want string }{
		{"deploymnts", "", "did you mean deployments?"},
		{"podz", "", "did you mean pods?"},
		{"pods/exex", "", "did you mean pods/exec?"},
		{"deployments", "batch", `not in the schema (group "batch")`},
		{"zzzzzzzz", "", "--raw sends it literally"},
		{"pods/", "", "want <resource> or <resource>/<subresource>"},
	} {
		_, err := s.ResolveResource(tc.arg, tc.group)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want ~ %q", tc.arg, err, tc.want)
		}
	}
}

func TestCheckVerb(t *testing.T) {
	s := defaultSchema(t)
	pods, _ := s.Lookup("", "pods", "")
	if err := s.CheckVerb("get", pods); err != nil {
		t.Error(err)
	}
	if err := s.CheckVerb("*", pods); err != nil {
		t.Error(err)
	}
	if err := s.CheckVerb("lst", pods); err == nil || !strings.Contains(err.Error(), "did you mean list?") {
		t.Errorf("lst: %v", err)
	}
	if err := s.CheckVerb("approve", pods); err == nil || !strings.Contains(err.Error(), "does not support") {
		t.Errorf("approve on pods: %v", err)
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		word  string
		cands []string
		want  string
	}{
		{"exprt", []string{"export", "capture", "resources"}, "export"},
		{"lsit", []string{"list", "get"}, "list"},
		{"x", []string{"get", "list"}, ""},
		{"completely", []string{"get", "list"}, ""},
	} {
		if got := Closest(tc.word, tc.cands); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}
