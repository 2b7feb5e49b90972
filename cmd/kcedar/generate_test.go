package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/format"
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
