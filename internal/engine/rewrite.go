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
	bin := func(b ast.BinaryNode) ast.BinaryNode { return ast.BinaryNode{Left: rw(b.Left), Right: rw(b.Right)} }
	un := func(u ast.UnaryNode) ast.UnaryNode { return ast.UnaryNode{Arg: rw(u.Arg)} }
	str := func(s ast.StrOpNode) ast.StrOpNode { return ast.StrOpNode{Arg: rw(s.Arg), Value: s.Value} }
	switch v := n.(type) {
	case ast.NodeValue, ast.NodeTypeVariable:
		return n
	case ast.NodeTypeAnd:
		return ast.NodeTypeAnd{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeOr:
		return ast.NodeTypeOr{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeEquals:
		return ast.NodeTypeEquals{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeNotEquals:
		return ast.NodeTypeNotEquals{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeLessThan:
		return ast.NodeTypeLessThan{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeLessThanOrEqual:
		return ast.NodeTypeLessThanOrEqual{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeGreaterThan:
		return ast.NodeTypeGreaterThan{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeGreaterThanOrEqual:
		return ast.NodeTypeGreaterThanOrEqual{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeIn:
		return ast.NodeTypeIn{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeAdd:
		return ast.NodeTypeAdd{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeSub:
		return ast.NodeTypeSub{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeMult:
		return ast.NodeTypeMult{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeContains:
		return ast.NodeTypeContains{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeContainsAll:
		return ast.NodeTypeContainsAll{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeContainsAny:
		return ast.NodeTypeContainsAny{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeHasTag:
		return ast.NodeTypeHasTag{BinaryNode: bin(v.BinaryNode)}
	case ast.NodeTypeGetTag:
		return ast.NodeTypeGetTag{BinaryNode: bin(v.BinaryNode)}
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
		args := make([]ast.IsNode, len(v.Args))
		for i, a := range v.Args {
			args[i] = rw(a)
		}
		return ast.NodeTypeExtensionCall{Name: v.Name, Args: args}
	case ast.NodeTypeRecord:
		els := make([]ast.RecordElementNode, len(v.Elements))
		for i, e := range v.Elements {
			els[i] = ast.RecordElementNode{Key: e.Key, Value: rw(e.Value)}
		}
		return ast.NodeTypeRecord{Elements: els}
	case ast.NodeTypeSet:
		els := make([]ast.IsNode, len(v.Elements))
		for i, e := range v.Elements {
			els[i] = rw(e)
		}
		return ast.NodeTypeSet{Elements: els}
	}
	panic(fmt.Sprintf("rewrite: unknown node %T", n))
}
