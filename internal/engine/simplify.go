package engine

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
)

// simplify folds what cedar-go's partial evaluator leaves: `X && true`,
// `true && X`, `X || false`, `false || X`, `if c then X else X`,
// `if c then true else false`, `!!X`. Each rewrite keeps errors: Cedar's && and
// || evaluate left to right, so `X && false` is kept (it is false OR an error);
// mayBeTrue reports it instead.
func simplify(n ast.IsNode) ast.IsNode {
	switch v := n.(type) {
	case ast.NodeTypeAnd:
		l, r := simplify(v.Left), simplify(v.Right)
		switch {
		case isBool(l, false):
			return l
		case isBool(l, true) && isBoolExpr(r):
			return r
		case isBool(r, true) && isBoolExpr(l):
			return l
		case isBool(r, false) && isBoolExpr(l) && !canError(l):
			return r
		}
		return ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: l, Right: r}}
	case ast.NodeTypeOr:
		l, r := simplify(v.Left), simplify(v.Right)
		switch {
		case isBool(l, true):
			return l
		case isBool(l, false) && isBoolExpr(r):
			return r
		case isBool(r, false) && isBoolExpr(l):
			return l
		case isBool(r, true) && isBoolExpr(l) && !canError(l):
			return r
		}
		return ast.NodeTypeOr{BinaryNode: ast.BinaryNode{Left: l, Right: r}}
	case ast.NodeTypeNot:
		a := simplify(v.Arg)
		if b, ok := boolValue(a); ok {
			return ast.NodeValue{Value: types.Boolean(!b)}
		}
		if inner, ok := a.(ast.NodeTypeNot); ok && isBoolExpr(inner.Arg) {
			return inner.Arg
		}
		return ast.NodeTypeNot{UnaryNode: ast.UnaryNode{Arg: a}}
	case ast.NodeTypeIfThenElse:
		c, t, e := simplify(v.If), simplify(v.Then), simplify(v.Else)
		if b, ok := boolValue(c); ok {
			if b {
				return t
			}
			return e
		}
		if isBoolExpr(c) && isBool(t, true) && isBool(e, false) {
			return c
		}
		return ast.NodeTypeIfThenElse{If: c, Then: t, Else: e}
	}
	return n
}

// canError reports whether n may fail to evaluate, for a policy that passed
// schema validation (which rules out type errors, unknown attributes and
// optional attributes read without has). What remains: arithmetic overflow,
// extension functions, getTag of a missing tag, attributes of entity literals
// (which may not exist), and errors partial evaluation already found.
func canError(n ast.IsNode) bool {
	found := false
	ast.Inspect(ast.NewNode(n), func(n ast.IsNode) bool {
		switch v := n.(type) {
		case ast.NodeTypeAdd, ast.NodeTypeSub, ast.NodeTypeMult, ast.NodeTypeNegate, ast.NodeTypeGetTag:
			found = true
		case ast.NodeTypeExtensionCall:
			switch v.Name {
			case "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual",
				"isIpv4", "isIpv6", "isLoopback", "isMulticast", "isInRange":
			default:
				found = true
			}
		case ast.NodeTypeAccess:
			if lit, ok := v.Arg.(ast.NodeValue); ok {
				if _, isEntity := lit.Value.(types.EntityUID); isEntity {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// isBoolExpr reports whether n certainly evaluates to a boolean or an error
// (never another type), so that `true && n` can become n.
func isBoolExpr(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeValue:
		_, ok := v.Value.(types.Boolean)
		return ok
	case ast.NodeTypeAnd, ast.NodeTypeOr, ast.NodeTypeNot, ast.NodeTypeEquals, ast.NodeTypeNotEquals,
		ast.NodeTypeLessThan, ast.NodeTypeLessThanOrEqual, ast.NodeTypeGreaterThan, ast.NodeTypeGreaterThanOrEqual,
		ast.NodeTypeIn, ast.NodeTypeHas, ast.NodeTypeHasTag, ast.NodeTypeLike, ast.NodeTypeIs, ast.NodeTypeIsIn,
		ast.NodeTypeContains, ast.NodeTypeContainsAll, ast.NodeTypeContainsAny, ast.NodeTypeIsEmpty:
		return true
	case ast.NodeTypeIfThenElse:
		return isBoolExpr(v.Then) && isBoolExpr(v.Else)
	case ast.NodeTypeExtensionCall:
		_, isErr := eval.ToPartialError(v)
		return isErr
	}
	return false
}

func boolValue(n ast.IsNode) (bool, bool) {
	if v, ok := n.(ast.NodeValue); ok {
		if b, ok := v.Value.(types.Boolean); ok {
			return bool(b), true
		}
	}
	return false, false
}

func isBool(n ast.IsNode, want bool) bool {
	b, ok := boolValue(n)
	return ok && b == want
}

// mayBeTrue is false when n can only be false or an error. It is a sound
// over-approximation: true means "perhaps".
func mayBeTrue(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeValue:
		b, ok := v.Value.(types.Boolean)
		return ok && bool(b)
	case ast.NodeTypeAnd:
		return mayBeTrue(v.Left) && mayBeTrue(v.Right)
	case ast.NodeTypeOr:
		return mayBeTrue(v.Left) || mayBeTrue(v.Right)
	case ast.NodeTypeIfThenElse:
		return mayBeTrue(v.Then) || mayBeTrue(v.Else)
	case ast.NodeTypeExtensionCall:
		_, isErr := eval.ToPartialError(v)
		return !isErr
	}
	return true
}

// isError reports whether n always fails to evaluate.
func isError(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeTypeExtensionCall:
		_, isErr := eval.ToPartialError(v)
		return isErr
	case ast.NodeTypeAnd:
		return isError(v.Left)
	case ast.NodeTypeOr:
		return isError(v.Left)
	}
	return false
}
