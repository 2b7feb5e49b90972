package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/tools/generate"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

// generateEvent is one ResponseComplete audit event line.
func generateEvent(id, user, groups, verb, uri, decision string) string {
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":"ResponseComplete","requestURI":%q,"verb":%q,"user":{"username":%q,"groups":[%s]},"requestReceivedTimestamp":"2026-05-01T12:00:0%sZ","annotations":{"authorization.k8s.io/decision":%q}}`,
		id, uri, verb, user, groups, id, decision)
}

func generateLog(t *testing.T, dir string) string {
	t.Helper()
	lines := []string{
		generateEvent("1", "alice", `"dev"`, "get", "/api/v1/namespaces/team/pods/web", "allow"),
		generateEvent("2", "alice", `"dev"`, "list", "/api/v1/namespaces/team/pods?limit=500", "allow"),
		generateEvent("3", "alice", `"dev"`, "get", "/api/v1/namespaces/team/secrets/token", "forbid"),
		generateEvent("4", "system:serviceaccount:team:robot", `"system:serviceaccounts"`, "create", "/api/v1/namespaces/team/configmaps", "allow"),
		generateEvent("5", "admin", `"system:masters"`, "delete", "/api/v1/nodes/n1", "allow"),
		generateEvent("6", "bob", "", "get", "/healthz", "allow"),
	}
	return writeFile(t, dir, "audit.log", strings.Join(lines, "\n")+"\n")
}

func TestGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	log := generateLog(t, dir)
	out, code := run(t, newGenerateCmd(), "--audit-log", log)
	if code != 0 {
		t.Fatalf("generate: %d %s", code, out)
	}
	laid, err := format.Source("out.cedar", []byte(out))
	if err != nil || string(laid.Text) != out {
		t.Errorf("the output is not laid out as kcedar fmt lays it out (%v):\n%s", err, out)
	}
	for _, want := range []string{`@id("generated/alice/pods-get")`, `@id("generated/alice/pods-list")`, `@id("generated/sa/team/robot/configmaps-create")`,
		`@id("generated/bob/nonresource-get")`, "system:masters members: not read", "4 allowed, 1 forbidden"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	// The same log gzipped, given twice: the same policies from twice the
	// requests.
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	zipped := writeFile(t, dir, "audit.log.gz", gz.String())
	twice, code := run(t, newGenerateCmd(), "--audit-log", zipped, "--audit-log", log)
	policiesOf := func(s string) string { _, rest, _ := strings.Cut(s, "\n\n"); return rest }
	if code != 0 || !strings.Contains(twice, "8 allowed, 2 forbidden") ||
		strings.ReplaceAll(policiesOf(twice), "2 requests", "1 request") != policiesOf(out) {
		t.Errorf("gzipped and plain: %d\n%s\nwant the policies of\n%s", code, twice, out)
	}
	gen := filepath.Join(dir, "gen")
	if out, code := run(t, newGenerateCmd(), "--audit-log", log, "-o", gen); code != 0 {
		t.Fatalf("generate -o: %d %s", code, out)
	}
	if out, code := run(t, newValidateCmd(), gen); code != 0 || !strings.Contains(out, "3 files, 4 policies: 0 errors") {
		t.Errorf("validate of -o: %d %s", code, out)
	}
	objs := filepath.Join(dir, "objects.yaml")
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--output-format", "policy-objects")
	if code != 0 || !strings.Contains(out, "kind: CedarPolicy") || !strings.Contains(out, "kind: NamespacedCedarPolicy\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: kcedar-generate\n  name: generated-alice\n  namespace: team") {
		t.Fatalf("generate --output-format policy-objects: %d %s", code, out)
	}
	if err := os.WriteFile(objs, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, newValidateCmd(), "--policy-objects", objs); code != 0 || strings.Contains(out, "not used") || !strings.Contains(out, "4 policies") {
		t.Errorf("validate --policy-objects of the objects: %d %s", code, out)
	}
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--audit")
	if code != 0 || strings.Count(out, `@enforcement("audit")`) != 4 {
		t.Errorf("generate --audit: %d %s", code, out)
	}
}

func TestGenerateOnlyWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	log := generateLog(t, dir)
	existing := writeFile(t, dir, "existing.cedar", `@id("dev-reads-pods") permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);`)
	out, code := run(t, newGenerateCmd(), "--audit-log", log, "--policies", existing)
	if code != 0 || strings.Contains(out, "generated/alice") || !strings.Contains(out, "2 allowed requests are allowed by the existing policies") ||
		!strings.Contains(out, "generated/sa/team/robot") {
		t.Errorf("with the existing policies: %d\n%s", code, out)
	}
}

func TestGenerateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	log := generateLog(t, dir)
	for _, args := range [][]string{
		{},
		{"--audit-log", filepath.Join(dir, "missing.log")},
		{"--audit-log", log, "--names", "some"},
		{"--audit-log", log, "--max-names", "0"},
		{"--audit-log", log, "--output-format", "yaml"},
		{"--audit-log", log, "--generalize-names", "some"},
		{"--audit-log", log, "--authorization-config", filepath.Join(dir, "missing.yaml")},
	} {
		if out, code := run(t, newGenerateCmd(), args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, out)
		}
	}
}

// The exploit of issue 42 through the command: a configmap name that
// closes its comment and opens a permit of everything, logged allowed.
// In every output (Cedar, --audit, policy objects, -o DIR) it stays a
// string: one policy, the generated one, audited with --audit. A name
// that is not valid UTF-8 is not granted, with a warning; a namespace
// that is no namespace name makes a CedarPolicy, never a
// NamespacedCedarPolicy elsewhere.
func TestGenerateHostileNames(t *testing.T) {
	dir := t.TempDir()
	exploit := `/api/v1/namespaces/team-a/configmaps/x%0A@id("p")%20permit%20(principal,%20action,%20resource);%0A`
	log := writeFile(t, dir, "audit.log", strings.Join([]string{
		generateEvent("1", "alice", "", "get", exploit, "allow"),
		generateEvent("2", "bob", "", "get", "/api/v1/namespaces/team-a/configmaps/bad%FF", "allow"),
		generateEvent("3", "carol", "", "get", "/api/v1/namespaces/x%0Ay/configmaps/c", "allow"),
	}, "\n")+"\n")
	checkOne := func(what, text string, audit bool) {
		t.Helper()
		ps, err := cedarlang.ParsePolicies("g.cedar", []byte(text))
		if err != nil || len(ps) != 1 || ps[0].ID == "p" || ps[0].IsAudit() != audit || !strings.HasPrefix(ps[0].ID, "generated/") {
			t.Errorf("%s: %d policies (%v), want one generated policy:\n%s", what, len(ps), err, text)
		}
	}
	for _, audit := range []bool{false, true} {
		args := []string{"--audit-log", log, "--output-format", "policy-objects"}
		if audit {
			args = append(args, "--audit")
		}
		out, code := run(t, newGenerateCmd(), args...)
		if code != 0 || !strings.Contains(out, `warning: allowed requests of user "bob": the name "bad\xff" is not valid UTF-8`) {
			t.Fatalf("generate: %d %s", code, out)
		}
		objs, err := readPackedObjects(strings.NewReader(out[strings.Index(out, "#"):]))
		objs = slices.DeleteFunc(objs, func(o packedObject) bool { return o.Kind == "" }) // the header's comments
		if err != nil || len(objs) != 2 {
			t.Fatalf("%d objects (%v):\n%s", len(objs), err, out)
		}
		for _, o := range objs {
			checkOne(o.Name, o.Spec.Content, audit)
			if o.Kind == "NamespacedCedarPolicy" && o.Namespace != "team-a" {
				t.Errorf("%s %s/%s", o.Kind, o.Namespace, o.Name)
			}
		}
	}
	gen := filepath.Join(dir, "gen")
	if out, code := run(t, newGenerateCmd(), "--audit-log", log, "-o", gen); code != 0 {
		t.Fatalf("generate -o: %d %s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(gen, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		checkOne(f, string(data), false)
	}
	if len(files) != 2 {
		t.Errorf("files %q, want alice's and carol's", files)
	}
}

// Two subjects whose object names would be the same get names of their
// own: no file or object is overwritten.
func TestGeneratedObjectNamesAreUnique(t *testing.T) {
	subjects := []generate.SubjectPolicies{{Slug: "x/y"}, {Slug: strings.TrimPrefix(generatedObjectName("x/y"), "generated-")}, {Slug: "x/y"}}
	names := generatedObjectNames(subjects)
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Errorf("names %q", names)
	}
	for _, n := range names {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("%q: %v", n, errs)
		}
	}
}

// issue44Log is what a new operator's audit log holds: kcedar's own
// ServiceAccount reading its objects, and alice's discovery, self-reviews,
// and work in two namespaces.
func issue44Log(t *testing.T, dir string) string {
	t.Helper()
	kcedar, alice := "system:serviceaccount:kcedar-system:kcedar", `"system:authenticated"`
	lines := []string{
		generateEvent("1", kcedar, `"system:serviceaccounts","system:serviceaccounts:kcedar-system","system:authenticated"`, "list", "/apis/kcedar.dev/v1alpha1/cedarpolicies?limit=500", "allow"),
		generateEvent("2", kcedar, `"system:serviceaccounts","system:serviceaccounts:kcedar-system","system:authenticated"`, "get", "/apis/coordination.k8s.io/v1/namespaces/kcedar-system/leases/kcedar", "allow"),
	}
	for i, uri := range []string{"/version", "/api", "/apis", "/apis/apps/v1", "/openapi/v3", "/openapi/v3/api/v1", "/healthz"} {
		lines = append(lines, generateEvent(fmt.Sprint(3+i), "alice", alice, "get", uri, "allow"))
	}
	lines = append(lines,
		generateEvent("a", "alice", alice, "create", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "allow"),
		generateEvent("b", "alice", alice, "create", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "allow"),
		generateEvent("c", "alice", alice, "get", "/api/v1/namespaces/team/pods/web", "allow"),
		generateEvent("d", "alice", alice, "list", "/api/v1/namespaces/other/configmaps?limit=500", "allow"),
	)
	return writeFile(t, dir, "audit.log", strings.Join(lines, "\n")+"\n")
}

// Issue 44: kcedar's own ServiceAccount (sent around kcedar by the
// matchConditions kcedar manifests writes) and what the bootstrap RBAC
// gives every user are left out, and said so; alice's grants, each
// bounded by a namespace, are NamespacedCedarPolicy objects.
func TestGenerateLeavesOutWhatKcedarNeverSeesAndEveryoneHas(t *testing.T) {
	dir := t.TempDir()
	log := issue44Log(t, dir)
	out, code := run(t, newGenerateCmd(), "--audit-log", log)
	for _, want := range []string{"excluded by the matchCondition of authorizer kcedar: request.user != 'system:serviceaccount:kcedar-system:kcedar'",
		"9 allowed requests are allowed by the bootstrap RBAC every user has", `@id("generated/alice/pods-get")`, `@id("generated/alice/configmaps-list")`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("want %q in: %d\n%s", want, code, out)
		}
	}
	if strings.Contains(out, "kcedar-system/kcedar") || strings.Contains(out, "nonresource") || strings.Contains(out, "selfsubject") || strings.Count(out, "@id(") != 2 {
		t.Errorf("want alice's two policies alone:\n%s", out)
	}
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--output-format", "policy-objects")
	if code != 0 || strings.Count(out, "kind: NamespacedCedarPolicy") != 2 || strings.Contains(out, "kind: CedarPolicy") ||
		!strings.Contains(out, "namespace: team") || !strings.Contains(out, "namespace: other") {
		t.Errorf("want alice's policies in a NamespacedCedarPolicy in team and one in other: %d\n%s", code, out)
	}
	objs := writeFile(t, dir, "objects.yaml", out)
	if out, code := run(t, newValidateCmd(), "--policy-objects", objs); code != 0 || strings.Contains(out, "not used") || !strings.Contains(out, "2 policies") {
		t.Errorf("validate --policy-objects of the objects: %d %s", code, out)
	}
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--include-rbac-allowed")
	if code != 0 || !strings.Contains(out, `"/openapi/v3/api/v1"`) || !strings.Contains(out, "selfsubjectaccessreviews") || strings.Contains(out, "bootstrap RBAC") {
		t.Errorf("--include-rbac-allowed: want the discovery and self-review policies: %d\n%s", code, out)
	}
	config := writeFile(t, dir, "authz.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n"+
		"- {type: Webhook, name: kcedar, webhook: {timeout: 3s, subjectAccessReviewVersion: v1, matchConditionSubjectAccessReviewVersion: v1, failurePolicy: Deny, connectionInfo: {type: InClusterConfig}}}\n")
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--authorization-config", config)
	if code != 0 || !strings.Contains(out, "generated/sa/kcedar-system/kcedar/") {
		t.Errorf("--authorization-config without matchConditions: want kcedar's ServiceAccount's policies: %d\n%s", code, out)
	}
}

// The grants bootstrapEveryoneRBAC holds are kube-apiserver v1.37.1's
// bootstrap policy for every user (rbacconvert's testdata is a copy of
// k8s.io/kubernetes' own).
func TestBootstrapEveryoneRBACIsKubernetes(t *testing.T) {
	in := &rbacconvert.Input{}
	if err := in.ReadPaths([]string{filepath.Join("..", "..", "internal", "tools", "rbacconvert", "testdata", "bootstrap")}); err != nil {
		t.Fatal(err)
	}
	got := bootstrapEveryoneRBAC()
	everyone := map[string]bool{}
	for _, b := range in.ClusterRoleBindings {
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.GroupKind && (s.Name == "system:authenticated" || s.Name == "system:unauthenticated")
		}) {
			everyone[b.Name] = true
			i := slices.IndexFunc(got.ClusterRoleBindings, func(g rbacv1.ClusterRoleBinding) bool { return g.Name == b.Name })
			if i < 0 || !reflect.DeepEqual(got.ClusterRoleBindings[i].Subjects, b.Subjects) || got.ClusterRoleBindings[i].RoleRef != b.RoleRef {
				t.Errorf("binding %s: Kubernetes has %+v", b.Name, b)
			}
		}
	}
	for _, r := range in.ClusterRoles {
		i := slices.IndexFunc(got.ClusterRoles, func(g rbacv1.ClusterRole) bool { return g.Name == r.Name })
		if everyone[r.Name] != (i >= 0) || (i >= 0 && !reflect.DeepEqual(got.ClusterRoles[i].Rules, r.Rules)) {
			t.Errorf("ClusterRole %s: bound to every user %v; Kubernetes' rules %+v", r.Name, everyone[r.Name], r.Rules)
		}
	}
	if len(everyone) != 3 || len(got.ClusterRoles) != 3 || len(got.ClusterRoleBindings) != 3 {
		t.Errorf("Kubernetes binds %v to every user; kcedar has %d roles, %d bindings", everyone, len(got.ClusterRoles), len(got.ClusterRoleBindings))
	}
}

// Issue 44: a request the existing policies allow on a condition on the
// pod is not generated, and the header says so.
func TestGenerateConditionalPermit(t *testing.T) {
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.log", strings.Join([]string{
		generateEvent("1", "alice", `"payments-dev","system:authenticated"`, "create", "/api/v1/namespaces/payments/pods?fieldManager=kubectl-create", "allow"),
		generateEvent("2", "alice", `"payments-dev","system:authenticated"`, "get", "/api/v1/namespaces/payments/pods/web", "allow"),
	}, "\n")+"\n")
	existing := writeFile(t, dir, "existing.cedar", `@id("payments-dev-on-node-1")
permit (principal in k8s::Group::"payments-dev", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "payments" && resource has object && resource.object has v1 && resource.object.v1 has spec
  && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "payments-node-1" };`)
	out, code := run(t, newGenerateCmd(), "--audit-log", log, "--policies", existing, "--group-subject", "payments-dev")
	if code != 0 || strings.Contains(out, "pods-create") || !strings.Contains(out, "generated/group/payments-dev/pods-get") ||
		!strings.Contains(out, "1 allowed requests are allowed by the existing policies on conditions") {
		t.Errorf("want the get alone generated: %d\n%s", code, out)
	}
}

// Generated names are written as a pattern, shown in the comment;
// --generalize-names=none keeps them.
func TestGenerateGeneralizesNames(t *testing.T) {
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.log", strings.Join([]string{
		generateEvent("1", "alice", "", "get", "/api/v1/namespaces/ci/pods/build-x7k2p/log", "allow"),
		generateEvent("2", "alice", "", "get", "/api/v1/namespaces/ci/pods/build-q9z4m/log", "allow"),
	}, "\n")+"\n")
	out, code := run(t, newGenerateCmd(), "--audit-log", log)
	if code != 0 || !strings.Contains(out, `resource.name like "build-*"`) || !strings.Contains(out, "build-* (generated-name suffix, e.g. build-q9z4m)") {
		t.Errorf("want build-*: %d\n%s", code, out)
	}
	out, code = run(t, newGenerateCmd(), "--audit-log", log, "--generalize-names", "none")
	if code != 0 || !strings.Contains(out, `["build-q9z4m", "build-x7k2p"].contains(resource.name)`) || strings.Contains(out, "like") {
		t.Errorf("--generalize-names=none: want the names: %d\n%s", code, out)
	}
}
