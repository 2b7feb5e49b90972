package testgen

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// Every policy of OtherShapes parses and is valid against the embedded
// schema, every shape and form occurs, tenants are distinct per policy
// count, and the output is deterministic.
func TestOtherShapesValid(t *testing.T) {
	const n = 2000
	s := embeddedschema.Schema(t)
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	policies := OtherShapes(n)
	if !slices.Equal(policies, OtherShapes(n)) {
		t.Fatal("OtherShapes is not deterministic")
	}
	ps, err := cedarlang.ParsePolicies("shapes.cedar", []byte(strings.Join(policies, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != n {
		t.Fatalf("%d policies, want %d", len(ps), n)
	}
	if errs := v.Validate(ps); len(errs) > 0 {
		for _, e := range errs[:min(len(errs), 10)] {
			t.Error(e)
		}
		t.Fatalf("%d invalid policies", len(errs))
	}
	forms := map[ShapeSpec]bool{}
	for _, spec := range shapeSpecs(n) {
		forms[ShapeSpec{Shape: spec.Shape, Form: spec.Form}] = true
	}
	for shape, k := range shapeForms {
		for f := 0; f < k; f++ {
			if !forms[ShapeSpec{Shape: shape, Form: f}] {
				t.Errorf("shape %s form %d never drawn", shape, f)
			}
		}
	}
	if got := OtherShapesTenants(100000); got < 10000 {
		t.Errorf("%d tenants at 100k policies: tenants must grow with the set", got)
	}
}

// The requests reach every shape's policies: as many requests, in the same
// order, every time; ServiceAccounts, plain users, non-resource requests and
// lists among them.
func TestOtherShapesRequests(t *testing.T) {
	reqs := OtherShapesRequests(600, 500)
	if len(reqs) != 500 || fmt.Sprint(reqs[7]) != fmt.Sprint(OtherShapesRequests(600, 500)[7]) {
		t.Fatal("OtherShapesRequests is not deterministic or returns the wrong count")
	}
	var sa, nonResource, list int
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r.User.Name, "system:serviceaccount:"):
			sa++
		case !r.ResourceRequest:
			nonResource++
		case r.Name == "":
			list++
		}
	}
	if sa < 20 || nonResource < 10 || list < 20 {
		t.Errorf("ServiceAccount %d, non-resource %d, list %d requests of 500", sa, nonResource, list)
	}
}
