package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

func TestSourcesAloneLoadOnlyOnceSet(t *testing.T) {
	v, err := cedarlang.NewSchemaValidator(schematest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(nil, v, quietLogger())
	if err := s.Load(); err == nil || s.Current() != nil {
		t.Fatalf("a store without paths or sources loaded: err=%v", err)
	}
	s.SetSources(nil) // synced, no objects: an empty set serves
	if err := s.Load(); err != nil || s.Current() == nil || s.Current().Len() != 0 {
		t.Fatalf("empty sources: err=%v set=%v", err, ids(s.Current()))
	}
	s.SetSources([]Source{
		{Name: "CedarPolicy/a", Data: []byte(policy("cluster-1"))},
		{Name: "NamespacedCedarPolicy/team/p", Namespace: "team", Data: []byte(policy("mine") + "permit(principal, action, resource);\n")},
	})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	got := ids(s.Current())
	want := []string{"cluster-1", "NamespacedCedarPolicy/team/p/mine", "NamespacedCedarPolicy/team/p:3:1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	for _, p := range s.Current().Policies[1:] {
		if text := string(p.Text()); !strings.Contains(text, `resource has namespace && (resource.namespace == "team")`) && !strings.Contains(text, `resource has namespace && resource.namespace == "team"`) {
			t.Errorf("policy %s is not confined: %s", p.ID, text)
		}
	}

	// A namespaced forbid, and a namespaced @id taking a cluster policy's
	// name, cannot reach outside: the forbid is refused (last good set
	// keeps serving) and the id is prefixed.
	gen := s.Current().Generation
	s.SetSources([]Source{{Name: "NamespacedCedarPolicy/team/q", Namespace: "team", Data: []byte(`forbid(principal, action, resource);`)}})
	err = s.Load()
	if err == nil || !strings.Contains(err.Error(), "NamespacedCedarPolicy/team/q:1:1") || !strings.Contains(err.Error(), "may only permit") {
		t.Fatalf("namespaced forbid: err=%v", err)
	}
	if s.Current().Generation != gen {
		t.Fatal("a refused source replaced the serving set")
	}
}

func TestSourcesCombineWithFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.cedar"), policy("file-1"))
	s := NewStore([]string{dir}, nil, quietLogger())
	s.SetSources([]Source{{Name: "CedarPolicy/x", Data: []byte(policy("obj-1"))}})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.Current()); !slices.Equal(got, []string{"file-1", "obj-1"}) {
		t.Fatalf("ids %v", got)
	}
	// A duplicate id across a file and an object keeps the last good set.
	gen := s.Current().Generation
	s.SetSources([]Source{{Name: "CedarPolicy/y", Data: []byte(policy("file-1"))}})
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "CedarPolicy/y:1:1") {
		t.Fatalf("duplicate id: %v", err)
	}
	if s.Current().Generation != gen {
		t.Fatal("swapped in a set with a duplicate id")
	}
	// The same text moving between namespaces is a change.
	s.SetSources([]Source{{Name: "N/p", Namespace: "a", Data: []byte(policy("z"))}})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	gen = s.Current().Generation
	s.SetSources([]Source{{Name: "N/p", Namespace: "b", Data: []byte(policy("z"))}})
	if err := s.Load(); err != nil || s.Current().Generation == gen {
		t.Fatalf("namespace change not reloaded: err=%v", err)
	}
	os.Remove(filepath.Join(dir, "a.cedar"))
}

// parseChecker is a FileChecker for tests: ParsePolicies and a Validator.
type parseChecker struct{ v Validator }

func (c parseChecker) CheckFiles(files []cedarlang.SourceFile) ([]*cedarlang.Policy, []error) {
	var all []*cedarlang.Policy
	var errs []error
	for _, f := range files {
		ps, err := cedarlang.ParsePolicies(f.Name, f.Data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, ps...)
	}
	if len(errs) == 0 {
		errs = c.v.Validate(all)
	}
	return all, errs
}

// With a Checker (serve's cedar/lint), namespaced sources are still confined
// to their namespace and validated, and a namespaced forbid is refused.
func TestSourcesConfinedWithChecker(t *testing.T) {
	v, err := cedarlang.NewSchemaValidator(schematest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.cedar"), policy("file-1"))
	s := NewStore([]string{dir}, v, quietLogger())
	s.Checker = parseChecker{v}
	s.SetSources([]Source{
		{Name: "CedarPolicy/a", Data: []byte(policy("cluster-1"))},
		{Name: "NamespacedCedarPolicy/team/p", Namespace: "team", Data: []byte(policy("mine"))},
	})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(s.Current()), []string{"file-1", "cluster-1", "NamespacedCedarPolicy/team/p/mine"}; !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	p := s.Current().Policies[2]
	if text := string(p.Text()); !strings.Contains(text, `resource.namespace == "team"`) {
		t.Errorf("policy %s is not confined: %s", p.ID, text)
	}
	gen := s.Current().Generation
	for _, src := range []Source{
		{Name: "NamespacedCedarPolicy/team/q", Namespace: "team", Data: []byte(`forbid(principal, action, resource);`)},
		{Name: "NamespacedCedarPolicy/team/r", Namespace: "team", Data: []byte(`permit(principal, action, resource is core::pods) when { resource.nosuch == "x" };`)},
	} {
		s.SetSources([]Source{src})
		if err := s.Load(); err == nil || !strings.Contains(err.Error(), src.Name) {
			t.Fatalf("%s: err=%v", src.Name, err)
		}
		if s.Current().Generation != gen {
			t.Fatalf("%s replaced the serving set", src.Name)
		}
	}
}
