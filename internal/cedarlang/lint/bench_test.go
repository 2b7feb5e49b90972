package lint

import (
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// deepUnscoped is an unscoped policy with a deep attribute path: cedar-go's
// validator checks it against every principal x action x resource type.
const deepUnscoped = `permit(principal, action, resource) when {
  resource has object && resource.object has v1 && resource.object.v1 has spec &&
  resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`

// Validation speed, each iteration with a fresh checker (no cached results):
//
//	go test -run '^$' -bench . -benchtime 3x ./internal/cedarlang/lint/
func BenchmarkCheckRBACLike1000(b *testing.B) {
	src := []byte(testgen.RBACLike(1000))
	s := testChecker(b).Schema
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := NewChecker(s)
		if err != nil {
			b.Fatal(err)
		}
		res := c.Check([]File{{Name: "rbac.cedar", Data: src}})
		if res.Errors() > 0 || len(res.Policies) < 1000 {
			b.Fatalf("%d errors, %d policies", res.Errors(), len(res.Policies))
		}
	}
}

func BenchmarkCheckDeepUnscoped(b *testing.B) {
	s := testChecker(b).Schema
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := NewChecker(s)
		if err != nil {
			b.Fatal(err)
		}
		if res := c.Check([]File{{Name: "deep.cedar", Data: []byte(deepUnscoped)}}); len(res.Diagnostics) > 0 {
			b.Fatal(res.Diagnostics)
		}
	}
}

// The validator alone (cedarlang.SchemaValidator, as kcedar serve runs it).
func BenchmarkSchemaValidatorRBACLike1000(b *testing.B) {
	s := testChecker(b).Schema
	ps, err := cedarlang.ParsePolicies("rbac.cedar", []byte(testgen.RBACLike(1000)))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := cedarlang.NewSchemaValidator(s)
		if err != nil {
			b.Fatal(err)
		}
		if errs := v.Validate(ps); len(errs) > 0 {
			b.Fatal(errs[0])
		}
	}
}
