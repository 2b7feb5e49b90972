package engine

import (
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// TestDerivedComputesOncePerResidualAndKey checks Engine.Derived: a value is
// derived once per residual value and key, with the memo entry of a memoized
// residual or in the engine's cache, never shared between expressions, entity
// types, keys or policies, and derived anew every time without caches.
func TestDerivedComputesOncePerResidualAndKey(t *testing.T) {
	set := policytest.Set(t, `
@id("a") permit (principal, action, resource) when { resource.name == "x" };
@id("b") permit (principal, action, resource) when { resource.name == "y" };
`)
	pa, pb := set.Policies[0], set.Policies[1]
	expr := func(name string) ast.IsNode {
		return ast.NodeTypeEquals{BinaryNode: ast.BinaryNode{
			Left:  ast.NodeTypeAccess{StrOpNode: ast.StrOpNode{Arg: ast.NodeTypeVariable{Name: "resource"}, Value: "name"}},
			Right: ast.NodeValue{Value: types.String(name)}}}
	}
	pod, secret := types.EntityType("k8s::core::v1::Pod"), types.EntityType("k8s::core::v1::Secret")
	shared := &memoEntry{}
	residuals := []Residual{
		{Policy: pa, Expr: expr("x"), EntityType: pod},
		{Policy: pa, Expr: expr("z"), EntityType: pod},
		{Policy: pa, Expr: expr("x"), EntityType: secret},
		{Policy: pb, Expr: expr("x"), EntityType: pod},
		{Policy: pa, Expr: expr("x"), EntityType: pod, memo: shared},
		{Policy: pa, Expr: expr("x"), EntityType: secret, memo: shared},
	}
	for _, cacheSize := range []int{0, 64} {
		e := NewEngine(schematest.Schema(), set, EngineOptions{CacheSize: cacheSize})
		shared.derived = nil
		calls := 0
		for round := range 3 {
			for i, r := range residuals {
				for _, key := range []string{"k1", "k2"} {
					want := [3]any{i, key, round}
					got := e.Derived(r, key, func() any { calls++; return want }).([3]any)
					cached := cacheSize > 0 || r.memo != nil
					if got[0] != i || got[1] != key || (cached && got[2] != 0) || (!cached && got[2] != round) {
						t.Fatalf("cache %d, residual %d, key %s, round %d: derived %v", cacheSize, i, key, round, got)
					}
				}
			}
		}
		wantCalls := 2 * len(residuals)
		if cacheSize == 0 {
			wantCalls = 3*2*4 + 2*2 // unmemoized residuals every round, memoized ones once
		}
		if calls != wantCalls {
			t.Errorf("cache %d: derive ran %d times, want %d", cacheSize, calls, wantCalls)
		}
	}
}
