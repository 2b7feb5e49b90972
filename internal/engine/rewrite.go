package engine

import (
	"fmt"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// rewrite rebuilds n top-down: f may replace a node (with its subtree);
// otherwise the node's children are rewritten.
func rewrite(n ast.IsNode, f func(ast.IsNode) (ast.IsNode, bool)) ast.IsNode {
	if r, ok := f(n); ok {
		return r
	}
	rw := func(c ast.IsNode) ast.IsNode { return rewrite(c, f) }
	if r, ok := rewriteBinary(n, rw); ok {
		return r
	}
	un := func(u ast.UnaryNode) ast.UnaryNode { return ast.UnaryNode{Arg: rw(u.Arg)} }
	str := func(s ast.StrOpNode) ast.StrOpNode { return ast.StrOpNode{Arg: rw(s.Arg), Value: s.Value} }
	switch v := n.(type) {
	case ast.NodeValue, ast.NodeTypeVariable:
		return n
	case ast.NodeTypeNot:
		return ast.NodeTypeNot{UnaryNode: un(v.UnaryNode)}
	case ast.NodeTypeNegate:
		return ast.NodeTypeNegate{UnaryNode: un(v.UnaryNode)}
	case ast.NodeTypeIsEmpty:
		return ast.NodeTypeIsEmpty{UnaryNode: un(v.UnaryNode)}
	case ast.NodeTypeAccess:
		return ast.NodeTypeAccess{StrOpNode: str(v.StrOpNode)}
	case ast.NodeTypeHas:
		return ast.NodeTypeHas{StrOpNode: str(v.StrOpNode)}
	case ast.NodeTypeLike:
		return ast.NodeTypeLike{Arg: rw(v.Arg), Value: v.Value}
	case ast.NodeTypeIs:
		return ast.NodeTypeIs{Left: rw(v.Left), EntityType: v.EntityType}
	case ast.NodeTypeIsIn:
		return ast.NodeTypeIsIn{NodeTypeIs: ast.NodeTypeIs{Left: rw(v.Left), EntityType: v.EntityType}, Entity: rw(v.Entity)}
	case ast.NodeTypeIfThenElse:
		return ast.NodeTypeIfThenElse{If: rw(v.If), Then: rw(v.Then), Else: rw(v.Else)}
	case ast.NodeTypeExtensionCall:
		return ast.NodeTypeExtensionCall{Name: v.Name, Args: rewriteAll(v.Args, rw)}
	case ast.NodeTypeRecord:
		els := make([]ast.RecordElementNode, len(v.Elements))
		for i, e := range v.Elements {
			els[i] = ast.RecordElementNode{Key: e.Key, Value: rw(e.Value)}
		}
		return ast.NodeTypeRecord{Elements: els}
	case ast.NodeTypeSet:
		return ast.NodeTypeSet{Elements: rewriteAll(v.Elements, rw)}
	}
	panic(fmt.Sprintf("rewrite: unknown node %T", n))
}

// rewriteAll rewrites each node of ns.
func rewriteAll(ns []ast.IsNode, rw func(ast.IsNode) ast.IsNode) []ast.IsNode {
	out := make([]ast.IsNode, len(ns))
	for i, n := range ns {
		out[i] = rw(n)
	}
	return out
}

// rewriteBinary rewrites the two operands of a binary node; ok is false for
// other nodes.
func rewriteBinary(n ast.IsNode, rw func(ast.IsNode) ast.IsNode) (ast.IsNode, bool) {
	bin := func(b ast.BinaryNode) ast.BinaryNode { return ast.BinaryNode{Left: rw(b.Left), Right: rw(b.Right)} }
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		return ast.NodeTypeAnd{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeOr:
		return ast.NodeTypeOr{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeEquals:
		return ast.NodeTypeEquals{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeNotEquals:
		return ast.NodeTypeNotEquals{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeLessThan:
		return ast.NodeTypeLessThan{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeLessThanOrEqual:
		return ast.NodeTypeLessThanOrEqual{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeGreaterThan:
		return ast.NodeTypeGreaterThan{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeGreaterThanOrEqual:
		return ast.NodeTypeGreaterThanOrEqual{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeIn:
		return ast.NodeTypeIn{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeAdd:
		return ast.NodeTypeAdd{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeSub:
		return ast.NodeTypeSub{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeMult:
		return ast.NodeTypeMult{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeContains:
		return ast.NodeTypeContains{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeContainsAll:
		return ast.NodeTypeContainsAll{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeContainsAny:
		return ast.NodeTypeContainsAny{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeHasTag:
		return ast.NodeTypeHasTag{BinaryNode: bin(v.BinaryNode)}, true
	case ast.NodeTypeGetTag:
		return ast.NodeTypeGetTag{BinaryNode: bin(v.BinaryNode)}, true
	}
	return nil, false
}
