package zoo

import (
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// Every generated policy is valid against the embedded schema, every shape
// occurs, and the output depends on the seed only.
func TestPoliciesValidAndMixed(t *testing.T) {
	s := embeddedschema.Schema(t)
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	text := Policies(2000, 1)
	if text != Policies(2000, 1) || text == Policies(2000, 2) {
		t.Fatal("not deterministic in the seed")
	}
	ps, err := cedarlang.ParsePolicies("zoo.cedar", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2000 {
		t.Fatalf("%d policies, want 2000", len(ps))
	}
	if errs := v.Validate(ps); len(errs) > 0 {
		for _, e := range errs[:min(len(errs), 10)] {
			t.Error(e)
		}
		t.Fatalf("%d invalid policies", len(errs))
	}
	count := map[string]int{}
	for _, p := range ps {
		for _, sh := range Shapes {
			if strings.HasSuffix(p.ID, "-"+sh.Name) {
				count[sh.Name]++
			}
		}
	}
	for _, sh := range Shapes {
		if count[sh.Name] < sh.Weight*2000/100/2 {
			t.Errorf("shape %s: %d policies of 2000, weight %d%%", sh.Name, count[sh.Name], sh.Weight)
		}
	}
	if len(Shapes) < 10 {
		t.Errorf("%d shapes, want at least 10", len(Shapes))
	}
}
