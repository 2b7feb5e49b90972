package generate

import (
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// TestPartsHoldWhatTheirNamespaceBounds: with SplitNamespaces, each
// subject's parts, those of a namespace confined to it as a
// NamespacedCedarPolicy confines them (cedarlang.ConfineToNamespace),
// allow every allowed request of the log but the system identities' and
// no forbidden one; and most grants of the namespaced traffic are in a
// namespace's part.
func TestPartsHoldWhatTheirNamespaceBounds(t *testing.T) {
	s := embeddedschema.Schema(t)
	for _, seed := range []uint64{21, 22} {
		log := synthesize(t, seed, 3000, rbacAllows(testgen.RBACConfig(seed, 40, 80)))
		res := generateFrom(t, s, Options{SplitNamespaces: true, GroupSubjects: []string{"dev"}}, log)
		var all []*cedarlang.Policy
		bounded, unbounded := 0, 0
		for _, subj := range res.Subjects {
			for _, part := range subj.Parts {
				ps, err := cedarlang.ParsePolicies(subj.Slug+"/"+part.Namespace, part.Text)
				if err != nil {
					t.Fatal(err)
				}
				if part.Namespace == "" {
					unbounded += len(ps)
				} else {
					bounded += len(ps)
					if ps, err = cedarlang.ConfineToNamespace(ps, part.Namespace, "NamespacedCedarPolicy/"+part.Namespace+"/"+subj.Slug+"/"); err != nil {
						t.Fatal(err)
					}
				}
				all = append(all, ps...)
			}
		}
		set, err := cedarlang.NewPolicySet(all)
		if err != nil {
			t.Fatal(err)
		}
		checkReplay(t, s, set, log)
		if bounded+unbounded != res.Count || bounded < unbounded {
			t.Errorf("seed %d: %d policies in a namespace's part, %d in none, of %d", seed, bounded, unbounded, res.Count)
		}
		t.Logf("seed %d: %d policies in a namespace's part, %d in none", seed, bounded, unbounded)
	}
}
