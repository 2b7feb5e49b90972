package store

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// withoutConfigMaps is schematest's schema after its configmaps resource went
// away (a CRD deleted, in a live cluster).
func withoutConfigMaps(t *testing.T) *schemagen.Schema {
	t.Helper()
	s := schematest.Schema()
	key := schemagen.ResourceKey{Resource: "configmaps"}
	if _, ok := s.Resources[key]; !ok {
		t.Fatal("schematest has no configmaps")
	}
	delete(s.Resources, key)
	return s
}

func schemaCheck(t *testing.T, s *schemagen.Schema) SchemaCheck {
	t.Helper()
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	return SchemaCheck{Schema: s, Validator: v}
}

const configMapsPolicy = "@id(\"cm\")\npermit(principal, action, resource is core::configmaps);\n"

func TestRebaseKeepsTheLastGoodSetAndSchemaWhenPoliciesBreak(t *testing.T) {
	old, next := schemaCheck(t, schematest.Schema()), schemaCheck(t, withoutConfigMaps(t))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pods.cedar"), policy("pods"))
	writeFile(t, filepath.Join(dir, "cm.cedar"), configMapsPolicy)
	s, rec := newStore(t, []string{dir}, old.Validator)
	s.Schema = old.Schema
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	serving := s.Current()
	if serving.Schema != old.Schema {
		t.Fatal("the set does not carry the store's schema")
	}
	reports := len(rec.results)

	err := s.Rebase(next)
	if err == nil || !strings.Contains(err.Error(), "cm.cedar") {
		t.Fatalf("rebase onto a schema without configmaps: %v", err)
	}
	if s.Current() != serving || s.Current().Schema != old.Schema {
		t.Fatal("a refused rebase replaced the serving set or its schema")
	}
	if s.LastError() != nil || len(rec.results) != reports {
		t.Fatalf("a refused rebase was reported as a failed load: %v, %d reports", s.LastError(), len(rec.results)-reports)
	}

	// The store still checks against the old schema: another configmaps
	// policy loads.
	writeFile(t, filepath.Join(dir, "cm2.cedar"), strings.ReplaceAll(configMapsPolicy, `"cm"`, `"cm2"`))
	if err := s.Load(); err != nil {
		t.Fatalf("a load after the refused rebase did not use the old schema: %v", err)
	}
	if s.Current().Schema != old.Schema {
		t.Fatal("schema changed by a load")
	}

	// Fixed: the rebase goes through and the new schema checks every later load.
	for _, f := range []string{"cm.cedar", "cm2.cedar"} {
		writeFile(t, filepath.Join(dir, f), "")
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	gen := s.Current().Generation
	if err := s.Rebase(next); err != nil {
		t.Fatal(err)
	}
	if s.Current().Schema != next.Schema || s.Current().Generation != gen+1 || !slices.Equal(ids(s.Current()), []string{"pods"}) {
		t.Fatalf("after the rebase: schema switched %v, generation %d (was %d), ids %v", s.Current().Schema == next.Schema, s.Current().Generation, gen, ids(s.Current()))
	}
	if r := rec.last(t); r.Err != nil || !r.Changed {
		t.Fatalf("a successful rebase must be reported as a change (the server swaps engines on it): %+v", r)
	}
	writeFile(t, filepath.Join(dir, "cm.cedar"), configMapsPolicy)
	if err := s.Load(); err == nil {
		t.Fatal("a configmaps policy loaded after the schema lost configmaps")
	}
	if s.Current().Schema != next.Schema {
		t.Fatal("a failed load changed the schema")
	}
}

func TestRebaseSourcesReplacesSourcesOnlyOnSuccess(t *testing.T) {
	old, next := schemaCheck(t, schematest.Schema()), schemaCheck(t, withoutConfigMaps(t))
	s, _ := newStore(t, nil, old.Validator)
	s.Schema = old.Schema
	s.SetSources([]Source{{Name: "CedarPolicy/a", Data: []byte(policy("a"))}})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	bad := []Source{{Name: "CedarPolicy/a", Data: []byte(policy("a"))}, {Name: "CedarPolicy/cm", Data: []byte(configMapsPolicy)}}
	if err := s.RebaseSources(next, bad); err == nil || !strings.Contains(err.Error(), "CedarPolicy/cm:") {
		t.Fatalf("want the configmaps source refused, got %v", err)
	}
	// The refused sources are not the store's: a plain load keeps the old ones.
	if err := s.Load(); err != nil || !slices.Equal(ids(s.Current()), []string{"a"}) {
		t.Fatalf("after a refused rebase: %v, ids %v", err, ids(s.Current()))
	}
	good := []Source{{Name: "CedarPolicy/a", Data: []byte(policy("a"))}, {Name: "CedarPolicy/b", Data: []byte(policy("b"))}}
	if err := s.RebaseSources(next, good); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(s.Current()), []string{"a", "b"}) || s.Current().Schema != next.Schema {
		t.Fatalf("after the rebase: ids %v", ids(s.Current()))
	}
}

func TestRebaseBeforeTheFirstLoadAdoptsTheSchema(t *testing.T) {
	old, next := schemaCheck(t, schematest.Schema()), schemaCheck(t, withoutConfigMaps(t))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.cedar"), configMapsPolicy)
	s, _ := newStore(t, []string{dir}, next.Validator)
	s.Schema = next.Schema
	if err := s.Load(); err == nil {
		t.Fatal("loaded a configmaps policy without configmaps in the schema")
	}
	// The same files, now valid: the cached failure must not stick.
	if err := s.Rebase(old); err != nil {
		t.Fatal(err)
	}
	if s.Current() != nil {
		t.Fatal("a rebase before the first good load loaded a set")
	}
	if err := s.Load(); err != nil || s.Current().Schema != old.Schema {
		t.Fatalf("load after adopting the schema: %v", err)
	}
}
