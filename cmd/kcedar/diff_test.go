package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

const libraryDir = "../../policies/library"

// copyTree copies the *.cedar files under src to a temp directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".cedar") {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestDiffCommandSelf(t *testing.T) {
	out, code := run(t, newDiffCmd(), "--exit-code", libraryDir, libraryDir)
	if code != 0 || !strings.Contains(out, "no change in access") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = run(t, newDiffCmd(), "-o", "json", libraryDir, copyTree(t, libraryDir))
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Changed || len(rep.Regions) != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
}

// TestDiffCommandWidened widens one permit of the library (list added to
// the kubelet's own-node permit) and expects exactly that region.
func TestDiffCommandWidened(t *testing.T) {
	dir := copyTree(t, libraryDir)
	file := filepath.Join(dir, "node-agents", "node-agents.cedar")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const from, to = `[k8s::Action::"get", k8s::Action::"watch"]`, `[k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"]`
	if !strings.Contains(string(data), from) {
		t.Fatalf("%s no longer has %s", file, from)
	}
	writeFile(t, filepath.Dir(file), filepath.Base(file), strings.Replace(string(data), from, to, 1))

	out, code := run(t, newDiffCmd(), "-o", "json", libraryDir, dir)
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.Changed || len(rep.Inexact) > 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	for _, g := range rep.Regions {
		if g.Kind != changeGained || g.Change.From != "NoOpinion" || g.Change.To != "Allow" || !slices.Equal(g.Verbs, []string{"list"}) ||
			!slices.Equal(g.Resources, []string{"nodes"}) || g.Subject.Kind != "node" || !slices.Equal(g.NewPolicies, []string{"kubelet-own-node"}) ||
			g.Example == nil || g.Example.Verb != "list" || g.Example.Resource != "nodes" || !strings.HasPrefix(g.Example.User, "system:node:") {
			t.Errorf("region %+v", g)
		}
	}
	if !slices.Equal(rep.Edited, []string{"kubelet-own-node"}) || len(rep.Removed)+len(rep.Added) != 0 {
		t.Errorf("edited %v, removed %v, added %v", rep.Edited, rep.Removed, rep.Added)
	}

	out, code = run(t, newDiffCmd(), "--exit-code", libraryDir, dir)
	if code != 3 || !strings.Contains(out, "NoOpinion → Allow") || !strings.Contains(out, "list  nodes") || !strings.Contains(out, "new: kubelet-own-node") {
		t.Errorf("table, --exit-code: exit %d:\n%s", code, out)
	}
	if _, code := run(t, newDiffCmd(), "--exit-code", "--fail-on", "lost", libraryDir, dir); code != 0 {
		t.Errorf("--fail-on lost: exit %d, want 0 (access is only gained)", code)
	}
	if out, code := run(t, newDiffCmd(), "-o", "markdown", dir, libraryDir); code != 0 || !strings.Contains(out, "#### lost: Allow → NoOpinion") ||
		!strings.Contains(out, "| <code>list</code> | <code>nodes</code> |") {
		t.Errorf("markdown: exit %d:\n%s", code, out)
	}
}

func TestDiffCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.cedar", `@id("typo") permit (principal, action, resource is core::pods) when { resource.nmespace == "dev" };`)
	if _, code := run(t, newDiffCmd(), libraryDir, bad); code != 1 {
		t.Errorf("invalid NEW: exit %d, want 1", code)
	}
	for _, args := range [][]string{{libraryDir}, {"-o", "yaml", libraryDir, libraryDir}, {"--fail-on", "more", libraryDir, libraryDir}} {
		if _, code := run(t, newDiffCmd(), args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// With --policy-objects OLD is the objects composed as serve composes
// them: erin's namespaced permit is confined to team-a, so a file granting
// it everywhere gains access in every other namespace.
func TestDiffCommandPolicyObjects(t *testing.T) {
	dir := t.TempDir()
	objs := writeFile(t, dir, "objects.yaml", `apiVersion: kcedar.dev/v1alpha1
kind: NamespacedCedarPolicy
metadata: {name: team-read, namespace: team-a}
spec:
  content: |
    @id("erin") permit(principal == k8s::User::"erin", action == k8s::Action::"get", resource is core::configmaps);
`)
	newDir := filepath.Join(dir, "new")
	if err := os.Mkdir(newDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, newDir, "erin.cedar", `@id("erin") permit(principal == k8s::User::"erin", action == k8s::Action::"get", resource is core::configmaps);`)
	out, code := run(t, newDiffCmd(), "-o", "json", "--policy-objects", objs, newDir)
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.Changed {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	for _, g := range rep.Regions {
		if g.Kind != changeGained || g.Subject.Name != "erin" || slices.Contains(g.Namespaces, "team-a") || !slices.Equal(g.Resources, []string{"configmaps"}) {
			t.Errorf("region %+v", g)
		}
	}
	if _, code := run(t, newDiffCmd(), "--policy-objects", objs, newDir, newDir); code != 2 {
		t.Errorf("--policy-objects with OLD and NEW: exit %d, want 2", code)
	}
}

// The changes a review once found diff blind to: each gains access, so
// --exit-code (default --fail-on gained) must exit 3.
var diffHoles = []struct{ name, old, new string }{
	{"namespace labels", `@id("team") permit(principal, action == k8s::Action::"get", resource is core::pods) when {
  resource has namespaceObject && resource.namespaceObject.metadata has labels &&
  resource.namespaceObject.metadata.labels.hasTag("team") && resource.namespaceObject.metadata.labels.getTag("team") == "a"
};`, `@id("team") permit(principal, action == k8s::Action::"get", resource is core::pods) when {
  resource has namespaceObject && resource.namespaceObject.metadata has labels &&
  resource.namespaceObject.metadata.labels.hasTag("team")
};`},
	{"label selector", `@id("agent") permit(principal == k8s::User::"agent", action == k8s::Action::"get", resource is core::pods);`,
		`@id("agent") permit(principal == k8s::User::"agent", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods) when {
  resource has object && resource.object.metadata has labels &&
  resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "agent"
};`},
	{"selector-derived name", `@id("one") permit(principal == k8s::User::"bob", action == k8s::Action::"get", resource is core::configmaps) when { resource.name == "x" };`,
		`@id("one") permit(principal == k8s::User::"bob", action == k8s::Action::"get", resource is core::configmaps) when { resource.name == "x" };
@id("watch-one") permit(principal == k8s::User::"bob", action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::configmaps) when { !resource.named && resource.name == "x" };`},
	{"widened condition", `@id("pin") permit(principal == k8s::User::"carol", action == k8s::Action::"create", resource is core::pods) when {
  resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe-node"
};`, `@id("pin") permit(principal == k8s::User::"carol", action == k8s::Action::"create", resource is core::pods) when {
  resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName != ""
};`},
}

// TestDiffCommandHoles: each change gains access and must fail --exit-code.
func TestDiffCommandHoles(t *testing.T) {
	for _, h := range diffHoles {
		t.Run(h.name, func(t *testing.T) {
			dir := t.TempDir()
			oldFile, newFile := writeFile(t, dir, "old.cedar", h.old), writeFile(t, dir, "new.cedar", h.new)
			out, code := run(t, newDiffCmd(), "--exit-code", oldFile, newFile)
			if code != 3 || strings.Contains(out, "no change in access") {
				t.Errorf("exit %d, want 3:\n%s", code, out)
			}
		})
	}
}

// A group's new grant is the group's: where no policy that may match names
// a user, the change holds for anyone in the group, and the diff says so
// instead of listing users the policies name elsewhere as members.
func TestDiffCommandSubjectsAreTrue(t *testing.T) {
	dir := t.TempDir()
	base := `@id("alice-lists") permit(principal == k8s::User::"alice", action == k8s::Action::"list", resource is core::pods);
@id("sa-lists") permit(principal == k8s::ServiceAccount::"system:serviceaccount:ci:bot", action == k8s::Action::"list", resource is core::pods);
`
	oldFile := writeFile(t, dir, "old.cedar", base)
	newFile := writeFile(t, dir, "new.cedar", base+`@id("payments") permit(principal in k8s::Group::"payments-dev", action == k8s::Action::"get", resource is core::pods);`)
	out, code := run(t, newDiffCmd(), "-o", "json", oldFile, newFile)
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Regions) != 1 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	g := rep.Regions[0]
	if g.Subject.Kind != "anyone" || !slices.Equal(g.Subject.InGroups, []string{"payments-dev"}) || len(g.Subject.NotIn) > 0 ||
		!slices.Equal(g.Verbs, []string{"get"}) || !slices.Equal(g.Resources, []string{"pods"}) || !slices.Equal(g.Any, []string{"names", "namespaces"}) {
		t.Errorf("region %+v", g)
	}
	out, _ = run(t, newDiffCmd(), oldFile, newFile)
	if !strings.Contains(out, "  members of payments-dev\n    get  pods\n") || strings.Contains(out, "alice") || strings.Contains(out, "ci:bot") {
		t.Errorf("table:\n%q", out)
	}
	// docs/reviewing-changes.md shows this group.
	doc, err := os.ReadFile("../../docs/reviewing-changes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```text\nGAINED:")
	block, _, _ = strings.Cut(block, "```")
	if _, group, _ := strings.Cut(out, "\nGAINED:"); block == "" || group != block {
		t.Errorf("docs/reviewing-changes.md shows\nGAINED:%s\nkcedar diff writes\nGAINED:%s", block, group)
	}
}

// What the method cannot decide exactly is said in the summary, before
// any region, and --exit-code fails whatever --fail-on names.
func TestDiffCommandSaysInexactFirst(t *testing.T) {
	dir := t.TempDir()
	oldFile := writeFile(t, dir, "old.cedar", `@id("uid") permit(principal, action == k8s::Action::"get", resource is core::pods) when { principal has uid && principal.uid == "u-1" };`)
	newFile := writeFile(t, dir, "new.cedar", `@id("uid") permit(principal, action == k8s::Action::"get", resource is core::pods) when { principal has uid && principal.uid == "u-2" };`)
	out, code := run(t, newDiffCmd(), "--exit-code", "--fail-on", "lost", oldFile, newFile)
	lines := strings.Split(out, "\n")
	if code != 3 || len(lines) < 3 || !strings.HasPrefix(lines[1], "NOT DECIDED EXACTLY: principal.uid.") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// bootstrapRBAC is Kubernetes' bootstrap RBAC converted to Cedar.
const bootstrapRBAC = "../../internal/tools/rbacconvert/testdata/bootstrap.cedar"

// A change of many policies reads in a terminal: a summary first, lines
// that fit lineWidth (a policy id longer than it on a line of its own),
// and at most so many groups; -o markdown stays a comment's size, every
// row of its tables of diffColumns cells.
func TestDiffCommandFitsATerminal(t *testing.T) {
	dir := t.TempDir()
	newFile := writeFile(t, dir, "new.cedar", `@id("ops") permit(principal in k8s::Group::"ops", action, resource is core::pods);`)
	out, code := run(t, newDiffCmd(), bootstrapRBAC, newFile)
	if code != 0 || !strings.HasSuffix(strings.Split(out, "\n")[0], "changed (policies: "+strings.Split(strings.Split(out, "(policies: ")[1], ")")[0]+")") ||
		!strings.Contains(out, "By change:") || !strings.Contains(out, "By policy") || !strings.Contains(out, "not shown") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > lineWidth && strings.Contains(strings.TrimSpace(line), " ") && !strings.Contains(line, ": ") {
			t.Errorf("a line of %d characters: %s", n, line)
		}
	}
	all, _ := run(t, newDiffCmd(), "--all", bootstrapRBAC, newFile)
	if len(all) <= len(out) {
		t.Errorf("--all shows no more than the default (%d bytes)", len(all))
	}
	md, code := run(t, newDiffCmd(), "-o", "markdown", bootstrapRBAC, newFile)
	if code != 0 || len(md) > maxMarkdownBytes+20000 {
		t.Fatalf("markdown: exit %d, %d bytes", code, len(md))
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|")-1 != len(diffColumns) {
			t.Errorf("a row of %d cells: %s", strings.Count(line, "|")-1, line)
		}
	}
}
