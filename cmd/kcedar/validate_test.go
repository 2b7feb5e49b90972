package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
)

// run executes a fresh command with args and returns its output and exit
// code (0, or the exitError's code; 2 for other errors, as main does).
func run(t *testing.T, cmd *cobra.Command, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	if err == nil {
		return out.String(), 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return out.String() + "\n" + err.Error(), ee.code
	}
	return out.String() + "\n" + err.Error(), 2
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.cedar", `@id("ok") permit (principal, action, resource is core::pods) when { resource.namespace == "dev" };`)
	bad := writeFile(t, dir, "bad.cedar", "@id(\"typo\")\npermit (principal, action, resource is core::pods)\nwhen { resource.nmespace == \"dev\" };\n")
	warn := writeFile(t, dir, "warn.cedar", `@id("star") permit (principal, action, resource is core::pods) when { resource.namespace == "*" };`)

	if out, code := run(t, newValidateCmd(), good); code != 0 || !strings.Contains(out, "1 file, 1 policy: 0 errors, 0 warnings") {
		t.Errorf("good: %d %s", code, out)
	}
	out, code := run(t, newValidateCmd(), bad)
	if code != 1 || !strings.Contains(out, bad+":3:17: policy typo: unknown attribute nmespace on core::pods") || !strings.Contains(out, "hint: did you mean namespace?") {
		t.Errorf("bad: %d %s", code, out)
	}
	if out, code := run(t, newValidateCmd(), warn); code != 0 || !strings.Contains(out, "warning: comparing to \"*\"") {
		t.Errorf("warning: %d %s", code, out)
	}
	if out, code := run(t, newValidateCmd(), "--strict-warnings", warn); code != 1 {
		t.Errorf("--strict-warnings: %d %s", code, out)
	}
	// JSON for CI tools.
	out, code = run(t, newValidateCmd(), "-o", "json", good, bad)
	if code != 1 {
		t.Errorf("json exit %d", code)
	}
	var rep validateReport
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n\n", 2)[0]), &rep); err != nil {
		t.Fatalf("json: %v: %s", err, out)
	}
	if rep.Valid || rep.Errors != 1 || rep.Files != 2 || len(rep.Diagnostics) != 1 {
		t.Fatalf("json: %+v", rep)
	}
	if d := rep.Diagnostics[0]; d.File != bad || d.Line != 3 || d.Column != 17 || d.Policy != "typo" || d.Code != lint.CodeUnknownAttr || d.Hint == "" {
		t.Errorf("json diagnostic: %+v", d)
	}
	// Usage and I/O errors.
	if _, code := run(t, newValidateCmd(), filepath.Join(dir, "missing.cedar")); code != 2 {
		t.Errorf("missing file: %d", code)
	}
	if _, code := run(t, newValidateCmd(), "-o", "yaml", good); code != 2 {
		t.Errorf("bad --output: %d", code)
	}
	if _, code := run(t, newValidateCmd()); code != 2 {
		t.Errorf("no paths: %d", code)
	}
	if _, code := run(t, newValidateCmd(), t.TempDir()); code != 2 {
		t.Errorf("empty directory: %d", code)
	}
	// The example policies are clean, warnings included.
	if out, code := run(t, newValidateCmd(), "--strict-warnings", "../../policies/library", "../../policies/quickstart"); code != 0 {
		t.Errorf("policies/: %d %s", code, out)
	}
}

// Hostile input through the validate command's code path: a clear error, no
// crash, bounded memory.
func TestValidateHostileInput(t *testing.T) {
	checker := testChecker(t)
	dir := t.TempDir()
	garbage := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(garbage)
	cases := []struct {
		name, content, want string
	}{
		{"deeply nested parentheses", "permit (principal, action, resource) when { " + strings.Repeat("(", 1_000_000) + "true" + strings.Repeat(")", 1_000_000) + " };", "nesting deeper than"},
		{"deeply nested sets", "permit (principal, action, resource) when { " + strings.Repeat("[", 100_000) + " };", "nesting deeper than"},
		{"a million operators", "permit (principal, action, resource) when { true" + strings.Repeat(" || true", 1_000_000) + " };", "nested too deeply"},
		{"a million negations", "permit (principal, action, resource) when { " + strings.Repeat("!", 1_000_000) + "true };", "nested too deeply"},
		{"huge file", "// " + strings.Repeat("x", cedarlang.MaxPolicyFileBytes+10) + "\n", "over the limit"},
		{"binary garbage", string(garbage), "not a Cedar text file"},
		{"NUL in a policy", "permit (principal, action, resource)\x00;", "not a Cedar text file"},
		{"invalid UTF-8", "permit (principal, action, resource) when { resource.name == \"\xff\xfe\" };", "not a Cedar text file"},
		{"unterminated comment", "permit (principal, action, resource); /* " + strings.Repeat("a", 1000), "comment not terminated"},
		{"many policies on one line", strings.Repeat(`permit (principal, action, resource is core::pods) when { resource.name == "x" };`, 20_000), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, "hostile.cedar", tc.content)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var out bytes.Buffer
			err := runValidate(&out, checker, []string{p}, validateOptions{output: "text"})
			runtime.ReadMemStats(&after)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v: %.500s", err, out.String())
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 1 {
				t.Fatalf("want exit 1, got %v: %.500s", err, out.String())
			}
			if !strings.Contains(out.String(), tc.want) || !strings.HasPrefix(out.String(), p+":") {
				t.Errorf("want %q at %s:..., got %.500s", tc.want, p, out.String())
			}
			if len(out.String()) > 2000 {
				t.Errorf("%d bytes of output", len(out.String()))
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
				t.Errorf("allocated %d MB", alloc>>20)
			}
		})
	}
}

func TestAuthorizeCommand(t *testing.T) {
	dir := t.TempDir()
	obj := writeFile(t, dir, "pv.yaml", "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\nspec:\n  storageClassName: dev\n")
	lib := "../../policies/library/kep5681"
	out, code := run(t, newAuthorizeCmd(), "-p", lib, "--user", "system:serviceaccount:storage:dev-provisioner", "--verb", "create", "--resource", "persistentvolumes", "--object", obj)
	if code != 0 || !strings.Contains(out, "decision: Conditional") || !strings.Contains(out, "policies: pv-dev-class-only") ||
		!strings.Contains(out, `resource.object.v1.spec.storageClassName == "dev"`) || !strings.Contains(out, "-> true") ||
		!strings.Contains(out, "outcome in admission: Allow") {
		t.Errorf("%d %s", code, out)
	}
	out, code = run(t, newAuthorizeCmd(), "-p", "../../policies/quickstart", "--as", "carl", "--as-group", "contractors", "--verb", "get", "--resource", "secrets", "-n", "dev", "-o", "json")
	var d engine.Report
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || d.Decision != "Deny" || len(d.Policies) != 1 || d.Policies[0] != "no-secrets-for-contractors" {
		t.Errorf("%d %v %s", code, err, out)
	}
	sar := writeFile(t, dir, "sar.yaml", "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: jane\n  groups: [dev]\n  resourceAttributes: {verb: list, resource: pods, namespace: dev}\n")
	if out, code := run(t, newAuthorizeCmd(), "-p", "../../policies/quickstart", "-f", sar); code != 0 || !strings.Contains(out, "decision: Allow") {
		t.Errorf("-f: %d %s", code, out)
	}
	if out, code := run(t, newAuthorizeCmd(), "-p", "../../policies/quickstart", "--verb", "get", "--path", "/healthz", "--user", "u"); code != 0 || !strings.Contains(out, "decision: NoOpinion") {
		t.Errorf("--path: %d %s", code, out)
	}
	for _, args := range [][]string{
		{"-p", "../../policies/quickstart", "--user", "u"},                                                                                // no verb
		{"-p", "../../policies/quickstart", "--user", "u", "--verb", "get"},                                                               // no resource
		{"-p", "../../policies/quickstart", "-f", sar, "--user", "u"},                                                                     // both
		{"-p", "../../policies/quickstart", "--user", "u", "--verb", "get", "--resource", "pods", "--object", filepath.Join(dir, "nope")}, // missing file
		{"--user", "u", "--verb", "get", "--resource", "pods"},                                                                            // no policies
	} {
		if out, code := run(t, newAuthorizeCmd(), args...); code != 2 {
			t.Errorf("%v: %d %s", args, code, out)
		}
	}
	bad := writeFile(t, dir, "bad.cedar", `permit (principal, action, resource is core::pod);`)
	if out, code := run(t, newAuthorizeCmd(), "-p", bad, "--user", "u", "--verb", "get", "--resource", "pods"); code != 1 || !strings.Contains(out, "did you mean core::pods?") {
		t.Errorf("invalid policies: %d %s", code, out)
	}
}

func TestTestCommand(t *testing.T) {
	if out, code := run(t, newTestCmd(), "../../policies/library"); code != 0 || !strings.Contains(out, "0 failed") {
		t.Errorf("policies/: %d %s", code, out)
	}
	dir := t.TempDir()
	writeFile(t, dir, "p.cedar", `@id("dev-pods") permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods) when { resource.namespace == "dev" };`)
	f := writeFile(t, dir, "p_test.yaml", `
tests:
- name: right
  request: {user: a, groups: [dev], verb: get, resource: pods, namespace: dev, name: p}
  expect: Allow
- name: wrong
  request: {user: a, groups: [dev], verb: get, resource: pods, namespace: prod, name: p}
  expect: Allow
`)
	out, code := run(t, newTestCmd(), f)
	if code != 1 || !strings.Contains(out, "FAIL "+f+": wrong") || !strings.Contains(out, "decision: got NoOpinion, want Allow") || !strings.Contains(out, "1 passed, 1 failed") {
		t.Errorf("%d %s", code, out)
	}
	out, code = run(t, newTestCmd(), "-o", "json", f)
	var rep struct{ Passed, Failed int }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n\n", 2)[0]), &rep); code != 1 || err != nil || rep.Passed != 1 || rep.Failed != 1 {
		t.Errorf("json: %d %v %s", code, err, out)
	}
	// Requests name resources as kubectl does (as kcedar authorize resolves
	// them); raw: true takes them as a SubjectAccessReview carries them.
	writeFile(t, dir, "k.cedar", `@id("k") permit (principal, action, resource) when {
  resource is apps::deployments || resource is core::pods_exec || resource is apps::deployments_scale };`)
	kubectl := writeFile(t, dir, "k_test.yaml", `
tests:
- {name: short name, request: {user: a, verb: get, resource: deploy, namespace: n}, expect: Allow}
- {name: group-qualified, request: {user: a, verb: get, resource: deployments.apps, namespace: n}, expect: Allow}
- {name: subresource, request: {user: a, verb: create, resource: pods/exec, namespace: n, name: p}, expect: Allow}
- {name: short subresource, request: {user: a, verb: get, resource: deploy/scale, namespace: n, name: d}, expect: Allow}
- {name: raw, request: {user: a, verb: get, resource: deploy, namespace: n, raw: true}, expect: NoOpinion}
- {name: unknown, request: {user: a, verb: get, resource: deploymnts, namespace: n}, expect: Allow}
`)
	out, code = run(t, newTestCmd(), kubectl)
	if code != 1 || !strings.Contains(out, "5 passed, 1 failed") || !strings.Contains(out, "FAIL "+kubectl+": unknown") || !strings.Contains(out, "did you mean") {
		t.Errorf("kubectl-style names: %d %s", code, out)
	}
	// A typo in a test file is an error, not a silently skipped expectation.
	typo := writeFile(t, dir, "typo_test.yaml", "tests:\n- name: x\n  request: {user: a, verb: get, resource: pods}\n  expected: Allow\n")
	if out, code := run(t, newTestCmd(), typo); code != 1 || !strings.Contains(out, "unknown field") {
		t.Errorf("typo: %d %s", code, out)
	}
	// Invalid policies: their diagnostics, and a failure.
	writeFile(t, dir, "p.cedar", `permit (principal, action, resource is core::pod);`)
	if out, code := run(t, newTestCmd(), f); code != 1 || !strings.Contains(out, "did you mean core::pods?") {
		t.Errorf("invalid policies: %d %s", code, out)
	}
}

// A set where one request meets many policies that only their verbs and
// types narrow gets a note (not a warning: the exit status and counts are
// unchanged), and -o json reports the numbers for any valid set.
func TestValidateNotesUnnarrowedPolicies(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < unnarrowedNote; i++ {
		// A principal's type narrows no more than a verb does.
		principal := "principal"
		if i%2 == 1 {
			principal = "principal is k8s::User"
		}
		fmt.Fprintf(&b, "@id(\"prefix-%d\") permit (%s, action == k8s::Action::\"get\", resource is core::pods) when { resource.name != \"app-%d\" };\n", i, principal, i)
	}
	b.WriteString(`@id("keyed") permit (principal in k8s::Group::"dev", action == k8s::Action::"get", resource is core::pods) when { resource.name like "x*" };` + "\n")
	// Predicates on any attribute the index knows narrow.
	b.WriteString(`@id("uid") permit (principal is k8s::User, action == k8s::Action::"get", resource is core::pods) when { principal has uid && ["u-1", "u-2"].contains(principal.uid) };` + "\n")
	b.WriteString(`@id("group-suffix") forbid (principal, action == k8s::Action::"get", resource) when { resource has apiGroup && resource.apiGroup like "*.t7.example.com" };` + "\n")
	many := writeFile(t, dir, "many.cedar", b.String())
	out, code := run(t, newValidateCmd(), many)
	want := fmt.Sprintf("note: a request to get core::pods meets %d policies that nothing but their verbs, resource types and principal type narrows", unnarrowedNote)
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "e.g. prefix-0 ("+many+":1:1)") || !strings.Contains(out, "0 errors, 0 warnings") {
		t.Errorf("many: %d %s", code, out)
	}
	if out, code := run(t, newValidateCmd(), "--strict-warnings", many); code != 0 {
		t.Errorf("a note fails --strict-warnings: %d %s", code, out)
	}
	out, _ = run(t, newValidateCmd(), "-o", "json", many)
	var rep validateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Unnarrowed == nil || rep.Unnarrowed.MaxPerRequest != unnarrowedNote || rep.Unnarrowed.Policies != unnarrowedNote || rep.Unnarrowed.Verb != "get" {
		t.Errorf("json: %v %+v\n%s", err, rep.Unnarrowed, out)
	}

	// One fewer: no note.
	few := writeFile(t, dir, "few.cedar", strings.Join(strings.SplitAfter(b.String(), ";\n")[1:], ""))
	if out, _ := run(t, newValidateCmd(), few); strings.Contains(out, "note:") {
		t.Errorf("few: %s", out)
	}
}
