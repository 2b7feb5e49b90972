package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if code != 3 || !strings.Contains(out, "NoOpinion→Allow") || !strings.Contains(out, "list") || !strings.Contains(out, "kubelet-own-node") {
		t.Errorf("table, --exit-code: exit %d:\n%s", code, out)
	}
	if _, code := run(t, newDiffCmd(), "--exit-code", "--fail-on", "lost", libraryDir, dir); code != 0 {
		t.Errorf("--fail-on lost: exit %d, want 0 (access is only gained)", code)
	}
	if out, code := run(t, newDiffCmd(), "-o", "markdown", dir, libraryDir); code != 0 || !strings.Contains(out, "| <code>Allow→NoOpinion</code>") {
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
