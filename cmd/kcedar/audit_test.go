package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

const auditCLIPolicies = `@id("alice-pods") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("trial-forbid") @enforcement("audit")
forbid(principal, action == k8s::Action::"delete", resource is core::pods);
`

// kcedar authorize shows the enforced decision and the audit policy that
// would have changed it; kcedar test can expect audit findings.
func TestAuthorizeAndTestShowAudit(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", auditCLIPolicies)
	out, code := run(t, newAuthorizeCmd(), "-p", pol, "--user", "alice", "--verb", "delete", "--resource", "pods", "-n", "a", "--name", "web")
	if code != 0 || !strings.Contains(out, "decision: Allow") || !strings.Contains(out, "audit: forbid trial-forbid would deny") {
		t.Fatalf("authorize (%d):\n%s", code, out)
	}
	out, code = run(t, newAuthorizeCmd(), "-p", pol, "--user", "alice", "--verb", "delete", "--resource", "pods", "-n", "a", "--name", "web", "-o", "json")
	if code != 0 || !strings.Contains(out, `"would": "deny"`) {
		t.Fatalf("authorize -o json (%d):\n%s", code, out)
	}
	test := func(audit string) string {
		return `tests:
- name: delete
  request: {user: alice, verb: delete, resource: pods, namespace: a, name: web}
  expect: Allow
` + audit + `- name: get
  request: {user: alice, verb: get, resource: pods, namespace: a, name: web}
  expect: Allow
  audit: []
`
	}
	f := writeFile(t, dir, "ok_test.yaml", test("  audit: [{policy: trial-forbid, would: deny}]\n"))
	if out, code := run(t, newTestCmd(), "-v", f); code != 0 || !strings.Contains(out, "audit: forbid trial-forbid would deny") {
		t.Fatalf("test (%d):\n%s", code, out)
	}
	f = writeFile(t, dir, "bad_test.yaml", test("  audit: []\n"))
	if out, code := run(t, newTestCmd(), f); code != 1 || !strings.Contains(out, "audit: got trial-forbid would deny, want none") {
		t.Fatalf("test expecting no finding (%d):\n%s", code, out)
	}
}

// An @enforcement value other than enforce or audit is refused with its
// position.
func TestInvalidEnforcementIsAnError(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", "\n@id(\"x\") @enforcement(\"dryrun\")\npermit(principal, action, resource);\n")
	out, code := run(t, newAuthorizeCmd(), "-p", pol, "--user", "u", "--verb", "get", "--resource", "pods")
	if code == 0 || !strings.Contains(out, "p.cedar:2:10") || !strings.Contains(out, `@enforcement("dryrun")`) {
		t.Fatalf("authorize (%d):\n%s", code, out)
	}
}

// --shadow reaches the server's options.
func TestServeShadowFlag(t *testing.T) {
	var o serveOptions
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(f)
	if err := f.Parse([]string{"--shadow", "--admission-enforcement"}); err != nil {
		t.Fatal(err)
	}
	if !o.shadow || !o.admission.enforcement {
		t.Fatalf("shadow %t, admission enforcement %t", o.shadow, o.admission.enforcement)
	}
}
