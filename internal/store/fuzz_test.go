package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// FuzzLoadPolicies: the policy loader (parse, build, validate, the store's
// load) never panics, and a source that fails to load never serves: the
// store keeps no set, or the last good one.
func FuzzLoadPolicies(f *testing.F) {
	for _, seed := range []string{
		policy("a"),
		forbidPolicy("f"),
		`@id("x") permit(principal in k8s::Group::"g", action in [k8s::Action::"get"], resource is core::pods) when { resource.namespace == "a" && context has x } unless { principal.name like "*" };`,
		`permit(principal, action, resource) when { 1 + 9223372036854775807 < 0 };`,
		`/* unclosed`, `@id("") permit(`, "permit(principal, action, resource);\x00", ``,
	} {
		f.Add([]byte(seed))
	}
	v, err := cedarlang.NewSchemaValidator(schematest.Schema())
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	good := filepath.Join(dir, "good.cedar")
	if err := os.WriteFile(good, []byte(policy("good")), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := cedarlang.ParsePolicies("fuzz.cedar", data)
		if err != nil && len(ps) > 0 {
			t.Fatalf("ParsePolicies returned %d policies with an error", len(ps))
		}
		if err == nil {
			if set, err := cedarlang.NewPolicySet(ps); err == nil {
				_ = v.Validate(set.Policies)
			}
		}
		file := filepath.Join(t.TempDir(), "p.cedar")
		if err := os.WriteFile(file, []byte(policy("good")), 0o644); err != nil {
			t.Fatal(err)
		}
		s := NewStore([]string{file}, v, quietLogger())
		if err := s.Load(); err != nil {
			t.Fatal(err)
		}
		before := s.Current()
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Load(); err != nil && s.Current() != before {
			t.Fatalf("a failed load replaced the set: %v", err)
		}
	})
}
