package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The groups kube-apiserver gives an impersonated user, pinned case by case
// against k8s.io/apiserver's impersonation filter.
func TestImpersonatedGroups(t *testing.T) {
	for _, tc := range []struct {
		user   string
		groups []string
		want   []string
	}{
		{"alice", nil, []string{"system:authenticated"}},
		{"alice", []string{"dev"}, []string{"dev", "system:authenticated"}},
		{"alice", []string{"system:authenticated", "dev"}, []string{"system:authenticated", "dev"}},
		{"alice", []string{"system:unauthenticated"}, []string{"system:unauthenticated"}},
		{"system:anonymous", nil, []string{"system:unauthenticated"}},
		{"system:anonymous", []string{"system:authenticated"}, []string{"system:authenticated", "system:unauthenticated"}},
		{"system:anonymous", []string{"system:unauthenticated"}, []string{"system:unauthenticated"}},
		{"", []string{"dev"}, []string{"dev", "system:authenticated"}},
	} {
		if got := impersonatedGroups(tc.user, slices.Clone(tc.groups)); !slices.Equal(got, tc.want) {
			t.Errorf("impersonatedGroups(%q, %q) = %q, want %q", tc.user, tc.groups, got, tc.want)
		}
	}
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
