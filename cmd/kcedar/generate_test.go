package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/tools/generate"
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
