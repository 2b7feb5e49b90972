package testgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// Every policy RandomPredicates draws when asked for valid ones parses and
// is valid against the embedded schema, over several seeds (each draws
// other keys, verbs and shapes); the draw is deterministic, and tenants grow
// with the set.
func TestRandomPredicatesValid(t *testing.T) {
	s := embeddedschema.Schema(t)
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 4; seed++ {
		o := PredicateOptions{Valid: true, Selective: true, NoLabels: seed%2 == 0, Templates: int(seed%3) * 40}
		policies := RandomPredicates(1500, seed, o)
		if !slices.Equal(policies, RandomPredicates(1500, seed, o)) {
			t.Fatal("RandomPredicates is not deterministic")
		}
		ps, err := cedarlang.ParsePolicies("random.cedar", []byte(strings.Join(policies, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		if errs := v.Validate(ps); len(errs) > 0 {
			for _, e := range errs[:min(len(errs), 10)] {
				t.Error(e)
			}
			t.Fatalf("seed %d: %d of %d policies invalid", seed, len(errs), len(ps))
		}
	}
	if m := NewPredicateMix(100000, 1, PredicateOptions{}); m.Tenants < 10000 {
		t.Errorf("%d tenants at 100k policies: tenants must grow with the set", m.Tenants)
	}
}

// Unchecked draws parse (reads that may fail included).
func TestRandomPredicatesParse(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		if _, err := cedarlang.ParsePolicies("random.cedar", []byte(strings.Join(RandomPredicates(1500, seed, PredicateOptions{}), "\n"))); err != nil {
			t.Fatal(err)
		}
	}
}

// Every policy of the fifth set's shapes is valid against the embedded
// schema.
func TestFifthValid(t *testing.T) {
	v, err := cedarlang.NewSchemaValidator(embeddedschema.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cedarlang.ParsePolicies("fifth.cedar", []byte(strings.Join(Fifth(1200), "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(ps); len(errs) > 0 {
		for _, e := range errs[:min(len(errs), 10)] {
			t.Error(e)
		}
		t.Fatalf("%d of %d policies invalid", len(errs), len(ps))
	}
}
