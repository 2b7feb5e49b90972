package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// namespacesOf is the Namespace objects a test case decides with (the
// file's, and the case's own namespaceObject), written as a List for
// --namespace-object; nil when there are none.
func namespacesOf(t *testing.T, dir string, tf *offline.TestFile, tc offline.TestCase) (string, entities.NamespaceLookup) {
	t.Helper()
	ns := entities.StaticNamespaces{}
	for _, raw := range tf.Namespaces {
		if err := offline.AddNamespaceObject(ns, raw); err != nil {
			t.Fatal(err)
		}
	}
	if len(tc.NamespaceObject) > 0 {
		one := entities.StaticNamespaces{}
		if err := offline.AddNamespaceObject(one, tc.NamespaceObject); err != nil {
			t.Fatal(err)
		}
		for name, obj := range one {
			ns[name] = obj
		}
	}
	if len(ns) == 0 {
		return "", nil
	}
	items := make([]any, 0, len(ns))
	for _, obj := range ns {
		items = append(items, obj)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "namespaces.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, ns
}

func TestReadNamespaceObjects(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ns.yaml")
	os.WriteFile(file, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  labels: {team: a}\n---\napiVersion: v1\nkind: NamespaceList\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n"), 0o644)
	ns, err := readNamespaceObjects([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, ok := ns.Namespace(name); !ok {
			t.Errorf("namespace %s missing", name)
		}
	}
	for content, why := range map[string]string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n":                                  "not a Namespace",
		"apiVersion: v1\nkind: Namespace\nmetadata: {}\n":                                   "no name",
		"kind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: a}\n": "twice",
		"": "empty",
	} {
		os.WriteFile(file, []byte(content), 0o644)
		if _, err := readNamespaceObjects([]string{file}); err == nil {
			t.Errorf("%s: accepted", why)
		}
	}
}
