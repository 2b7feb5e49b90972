package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// The groups kube-apiserver gives an impersonated user: impersonatedGroups
// against k8s.io/apiserver's own impersonation filter (constrained
// impersonation, then legacy, as kube-apiserver runs it), with an authorizer
// that allows every impersonation, for usernames of every kind (valid and
// invalid ServiceAccounts and nodes) with and without groups.
func TestImpersonatedGroupsAsTheFilterGivesThem(t *testing.T) {
	users := []string{"alice", "", "system:anonymous", "system:serviceaccount:team-a:builder", "system:serviceaccount:kube-system:X",
		"system:serviceaccount:ns:a:b", "system:node:worker-1", "system:node:Worker_1", "system:node:", "system:nodes"}
	groupSets := [][]string{nil, {"dev"}, {"system:authenticated", "dev"}, {"system:unauthenticated"}, {"system:nodes"}}
	compared := 0
	for _, u := range users {
		for _, groups := range groupSets {
			want, ok := filterImpersonates(t, u, groups)
			if !ok {
				continue // the filter refuses this identity
			}
			compared++
			if got := impersonatedGroups(u, slices.Clone(groups)); !slices.Equal(got, want) {
				t.Errorf("impersonatedGroups(%q, %q) = %q; kube-apiserver's filter gives %q", u, groups, got, want)
			}
		}
	}
	if compared < len(users)*2 {
		t.Fatalf("the filter accepted only %d identities", compared)
	}
}

// filterImpersonates is the groups k8s.io/apiserver's impersonation filter
// gives username impersonated with groups by an authenticated user, every
// impersonation allowed; ok is false when the filter refuses the request.
func filterImpersonates(t *testing.T, username string, groups []string) (got []string, ok bool) {
	t.Helper()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := genericapirequest.UserFrom(r.Context())
		got, ok = u.GetGroups(), true
	})
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)
	h := impersonation.WithConstrainedImpersonation(inner, authorizerfactory.NewAlwaysAllowAuthorizer(), codecs)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/pods", nil)
	req.Header.Set(authenticationv1.ImpersonateUserHeader, username)
	for _, g := range groups {
		req.Header.Add(authenticationv1.ImpersonateGroupHeader, g)
	}
	ctx := genericapirequest.WithUser(req.Context(), &user.DefaultInfo{Name: "admin", Groups: []string{"system:authenticated"}})
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods", Namespace: "default"})
	h.ServeHTTP(httptest.NewRecorder(), req.WithContext(ctx))
	return got, ok
}

// authorize takes kubectl's flags and, deprecated, its older ones: both
// give the same request, with system:authenticated added.
func TestAuthorizeIdentityFlagsAndAliases(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", `@id("authenticated-read")
permit (principal in k8s::Group::"system:authenticated", action == k8s::Action::"get", resource is core::pods)
when { principal.hasTag("team") && principal.getTag("team").contains("a") && principal has uid && principal.uid == "u1" };`)
	for _, args := range [][]string{
		{"--as", "alice", "--as-uid", "u1", "--as-user-extra", "team=a"},
		{"--user", "alice", "--uid", "u1", "--extra", "team=a"},
		{"--as", "alice", "--uid", "u1", "--as-user-extra", "team=b", "--extra", "team=a"},
	} {
		out, code := run(t, newAuthorizeCmd(), append([]string{"-p", pol, "--verb", "get", "--resource", "pods", "-n", "x"}, args...)...)
		if code != 0 || !strings.Contains(out, "decision: Allow") {
			t.Errorf("%q: code %d\n%s", args, code, out)
		}
	}
	out, code := run(t, newAuthorizeCmd(), "-p", pol, "--verb", "get", "--resource", "pods", "--as", "alice", "--as-uid", "u1", "--as-user-extra", "team=b")
	if code != 0 || !strings.Contains(out, "decision: NoOpinion") {
		t.Errorf("another extra value: code %d\n%s", code, out)
	}
	if out, code := run(t, newAuthorizeCmd(), "-p", pol, "--verb", "get", "--resource", "pods", "--as", "alice", "--user", "bob"); code != 2 || !strings.Contains(out, "not both") {
		t.Errorf("--as and --user differing: code %d\n%s", code, out)
	}
	if out, code := run(t, newAuthorizeCmd(), "-p", pol, "--verb", "get", "--resource", "pods", "--as", "alice", "--as-user-extra", "novalue"); code != 2 || !strings.Contains(out, "KEY=VALUE") {
		t.Errorf("malformed extra: code %d\n%s", code, out)
	}
	// system:anonymous is not authenticated.
	if out, code := run(t, newAuthorizeCmd(), "-p", pol, "--verb", "get", "--resource", "pods", "--as", "system:anonymous", "--as-uid", "u1", "--as-user-extra", "team=a"); code != 0 || !strings.Contains(out, "decision: NoOpinion") {
		t.Errorf("anonymous: code %d\n%s", code, out)
	}
}

// can-i --list asks with the groups kubectl's impersonated request has: a
// rule granted to system:authenticated shows, and the SubjectRulesReview's
// spec names the group.
func TestCanIListAddsAuthenticatedGroup(t *testing.T) {
	pol := writeFile(t, t.TempDir(), "p.cedar", `@id("authenticated-discovery")
permit (principal in k8s::Group::"system:authenticated", action == k8s::Action::"get", resource is k8s::NonResourceURL)
when { resource.path == "/version" };`)
	out, code := run(t, newCanICmd(), "--list", "--as", "alice", "-p", pol, "-o", "json")
	if code != 0 {
		t.Fatalf("code %d\n%s", code, out)
	}
	var srr struct {
		Spec struct {
			Groups []string `json:"groups"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &srr); err != nil {
		t.Fatal(err, out)
	}
	if !slices.Equal(srr.Spec.Groups, []string{"system:authenticated"}) || !strings.Contains(out, `"/version"`) {
		t.Errorf("groups %q, want system:authenticated and the /version rule:\n%s", srr.Spec.Groups, out)
	}
	out, code = run(t, newCanICmd(), "--list", "--as", "system:anonymous", "-p", filepath.Clean(pol))
	if code != 0 || strings.Contains(out, "/version") {
		t.Errorf("anonymous: code %d, want no /version rule:\n%s", code, out)
	}
}
