package main

import (
	"strings"
	"testing"
)

// The verbs of constrained impersonation through the commands: authorize
// decides them without --raw (impersonate:<mode> resolves its identity in
// authentication.k8s.io), who-can and can-i --list name them.
func TestImpersonationVerbsCommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.cedar", `
@id("lucas-node-foo") permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate:arbitrary-node", resource is io::k8s::authentication::nodes)
when { resource.name == "foo" };
@id("lucas-get-pods") permit(principal == k8s::User::"lucas", action == k8s::Action::"impersonate-on:arbitrary-node:get", resource is core::pods);
@id("agent-own-node") permit(principal == k8s::ServiceAccount::"system:serviceaccount:monitoring:agent", action == k8s::Action::"impersonate:associated-node", resource is io::k8s::authentication::nodes);
@id("ui-reads") permit(principal == k8s::User::"lucas", action in [k8s::Action::"impersonate-on:user-info:get"], resource is core::pods);
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "lucas", "--verb", "impersonate:arbitrary-node", "--resource", "nodes", "--name", "foo"}, "decision: Allow"},
		{[]string{"--user", "lucas", "--verb", "impersonate:arbitrary-node", "--resource", "nodes", "--name", "bar"}, "decision: NoOpinion"},
		{[]string{"--user", "system:serviceaccount:monitoring:agent", "--verb", "impersonate:associated-node", "--resource", "nodes", "--name", "*"}, "decision: Allow"},
		{[]string{"--user", "lucas", "--verb", "impersonate-on:user-info:get", "--resource", "pods", "-n", "default", "--name", "web"}, "decision: Allow"},
		{[]string{"--user", "lucas", "--verb", "impersonate-on:user-info:list", "--resource", "pods", "-n", "default"}, "decision: NoOpinion"},
	} {
		out, code := run(t, newAuthorizeCmd(), append([]string{"--policies", dir}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("authorize %v: exit %d\n%s", tc.args, code, out)
		}
	}
	if out, code := run(t, newAuthorizeCmd(), "--policies", dir, "--user", "lucas", "--verb", "impersonate:user-info", "--resource", "pods"); code != 2 || !strings.Contains(out, "does not support") {
		t.Errorf("impersonate:user-info on pods: exit %d\n%s", code, out)
	}
	out, code := run(t, newWhoCanCmd(), "impersonate-on:arbitrary-node:get", "pods", "-n", "default", "--policies", dir)
	if code != 0 || !strings.Contains(out, "lucas") {
		t.Errorf("who-can (exit %d):\n%s", code, out)
	}
	out, code = run(t, newCanICmd(), "--list", "--as", "lucas", "-n", "default", "--policies", dir)
	if code != 0 || !strings.Contains(out, "impersonate-on:arbitrary-node:get") || !strings.Contains(out, "impersonate:arbitrary-node") {
		t.Errorf("can-i --list (exit %d):\n%s", code, out)
	}
}
