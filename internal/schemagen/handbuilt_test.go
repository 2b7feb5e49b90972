package schemagen_test

import (
	"testing"

	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// Models built by hand (without Maps, object type names or a complete Verbs
// list, as schematest builds them for other packages' tests) still print a
// schema that parses and resolves in both formats.
func TestHandBuiltModelPrints(t *testing.T) {
	s := schematest.Schema()
	if _, err := cedarschema.NewSchemaFromAST(s.CedarAST()).Resolve(); err != nil {
		t.Fatal(err)
	}
	text, err := s.MarshalCedar()
	if err != nil {
		t.Fatal(err)
	}
	js, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b cedarschema.Schema
	if err := a.UnmarshalCedar(text); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resolve(); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if err := b.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resolve(); err != nil {
		t.Fatal(err)
	}
}
