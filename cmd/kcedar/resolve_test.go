package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const resolvePolicy = `@id("deploy-readers")
permit (principal == k8s::User::"u", action == k8s::Action::"get", resource is apps::deployments)
when { resource.namespace == "x" };
@id("scalers")
permit (principal == k8s::User::"u", action == k8s::Action::"update", resource is apps::deployments_scale);
`

// kubectl-style resources resolve to what serve sees for the same request.
func TestAuthorizeResolvesLikeKubectl(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(resolvePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--policies", dir, "--user", "u", "-n", "x"}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--verb", "get", "--resource", "deployments"}, 0, []string{"apps/v1 deployments -> apps::deployments", "decision: Allow"}},
		{[]string{"--verb", "get", "--resource", "deploy"}, 0, []string{"decision: Allow"}},
		{[]string{"--verb", "get", "--resource", "Deployment"}, 0, []string{"decision: Allow"}},
		{[]string{"--verb", "get", "--resource", "deployments.apps"}, 0, []string{"decision: Allow"}},
		{[]string{"--verb", "get", "--resource", "deployments.v1.apps"}, 0, []string{"decision: Allow"}},
		{[]string{"--verb", "update", "--resource", "deploy/scale"}, 0, []string{"apps/v1 deployments/scale -> apps::deployments_scale", "decision: Allow"}},
		{[]string{"--verb", "update", "--resource", "deployments", "--subresource", "scale"}, 0, []string{"decision: Allow"}},
		{[]string{"--verb", "get", "--resource", "pods/exec"}, 0, []string{"v1 pods/exec -> core::pods_exec", "NoOpinion"}},
		// --raw keeps the literal request: core "deployments" is unknown.
		{[]string{"--raw", "--verb", "get", "--resource", "deployments"}, 0, []string{"NoOpinion"}},
		{[]string{"--verb", "get", "--resource", "deploymnts"}, 2, []string{"did you mean deployments?"}},
		{[]string{"--verb", "gett", "--resource", "deployments"}, 2, []string{"did you mean get?"}},
		{[]string{"--verb", "get", "--resource", "deployments", "--api-group", "batch"}, 2, []string{`not in the schema (group "batch")`}},
	} {
		out, code := run(t, newAuthorizeCmd(), append(base, tc.args...)...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d:\n%s", tc.args, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in:\n%s", tc.args, w, out)
			}
		}
	}
}

// -f - reads the SubjectAccessReview from stdin once.
func TestAuthorizeStdin(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(resolvePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	go func() {
		w.WriteString(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","resourceAttributes":{"verb":"get","group":"apps","resource":"deployments","namespace":"x"}}}`)
		w.Close()
	}()
	out, code := run(t, newAuthorizeCmd(), "--policies", dir, "-f", "-")
	if code != 0 || !strings.Contains(out, "decision: Allow") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = run(t, newAuthorizeCmd(), "--policies", dir, "-f", "-", "--object", "-")
	if code != 2 || !strings.Contains(out, "only one of") {
		t.Fatalf("-f - --object -: exit %d:\n%s", code, out)
	}
}
