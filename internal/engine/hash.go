package engine

import (
	"hash/maphash"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

var hashSeed = maphash.MakeSeed()

// hashExpr hashes an expression's structure and literals (collisions are
// resolved by ast.Equal, so this only needs to be fast and spread well).
func hashExpr(n ast.IsNode) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	ast.Inspect(ast.NewNode(n), func(n ast.IsNode) bool {
		switch v := n.(type) {
		case ast.NodeValue:
			h.WriteString(v.Value.String())
		case ast.NodeTypeAccess:
			h.WriteString(".")
			h.WriteString(string(v.Value))
		case ast.NodeTypeHas:
			h.WriteString(" has ")
			h.WriteString(string(v.Value))
		case ast.NodeTypeLike:
			h.WriteString(" like ")
			h.Write(v.Value.MarshalCedar())
		case ast.NodeTypeIs:
			h.WriteString(" is ")
			h.WriteString(string(v.EntityType))
		case ast.NodeTypeIsIn:
			h.WriteString(" isin ")
			h.WriteString(string(v.EntityType))
		case ast.NodeTypeExtensionCall:
			h.WriteString(string(v.Name))
		case ast.NodeTypeVariable:
			h.WriteString(string(v.Name))
		case ast.NodeTypeRecord:
			for _, e := range v.Elements {
				h.WriteString(string(e.Key))
			}
		}
		h.WriteString(typeTag(n))
		return true
	})
	return h.Sum64()
}

func typeTag(n ast.IsNode) string {
	switch n.(type) {
	case ast.NodeTypeAnd:
		return "&"
	case ast.NodeTypeOr:
		return "|"
	case ast.NodeTypeNot:
		return "!"
	case ast.NodeTypeEquals:
		return "="
	case ast.NodeTypeNotEquals:
		return "~"
	case ast.NodeTypeLessThan:
		return "<"
	case ast.NodeTypeLessThanOrEqual:
		return "l"
	case ast.NodeTypeGreaterThan:
		return ">"
	case ast.NodeTypeGreaterThanOrEqual:
		return "g"
	case ast.NodeTypeIn:
		return "i"
	case ast.NodeTypeIfThenElse:
		return "?"
	case ast.NodeTypeAdd:
		return "+"
	case ast.NodeTypeSub:
		return "-"
	case ast.NodeTypeMult:
		return "*"
	case ast.NodeTypeNegate:
		return "n"
	case ast.NodeTypeContains:
		return "c"
	case ast.NodeTypeContainsAll:
		return "C"
	case ast.NodeTypeContainsAny:
		return "y"
	case ast.NodeTypeIsEmpty:
		return "e"
	case ast.NodeTypeHasTag:
		return "t"
	case ast.NodeTypeGetTag:
		return "T"
	case ast.NodeTypeSet:
		return "S"
	case ast.NodeTypeRecord:
		return "R"
	}
	return ","
}
