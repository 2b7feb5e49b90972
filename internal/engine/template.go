package engine

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
)

// TemplateSlot is the name of the i-th value a template reads from its
// context: "v0", "v1", ...
func TemplateSlot(i int) string { return "v" + strconv.Itoa(i) }

// PatternSlot is the name of the i-th `like` pattern a template reads from
// its context: "p0", "p1", ...
func PatternSlot(i int) string { return "p" + strconv.Itoa(i) }

// Template splits n into its form and its constants: the template is n with
// the i-th literal value replaced by a read of `context.v<i>` (TemplateSlot)
// and the i-th `like` pattern by the placeholder pattern "p<i>"
// (PatternSlot); values and patterns are those literals in that order.
// Evaluating the template with the context {v0: values[0], ...} and its
// patterns put back (InstantiatePatterns) is evaluating n, errors included,
// since a context read never fails where its slot is set and every other
// node is kept. Residuals of policies that differ only in their constants
// and patterns have the same template.
//
// Extension calls (`ip("10.0.0.0/8")`) and the names of tags are part of the
// form, as attribute names are. ok is false for an expression with no
// template: one that reads the context itself, or holds a partial error or
// one of partial evaluation's variable markers.
func Template(n ast.IsNode) (template ast.IsNode, values []types.Value, patterns []types.Pattern, ok bool) {
	ok = true
	var slot func(ast.IsNode) (ast.IsNode, bool)
	// tagged keeps a tag's name (a literal) in the form, as an attribute's
	// name is: it names what is read, it is not a constant compared.
	tagged := func(b ast.BinaryNode) (ast.BinaryNode, bool) {
		if _, literal := b.Right.(ast.NodeValue); !literal {
			return b, false
		}
		return ast.BinaryNode{Left: rewrite(b.Left, slot), Right: b.Right}, true
	}
	slot = func(n ast.IsNode) (ast.IsNode, bool) {
		if _, isErr := eval.ToPartialError(n); isErr {
			ok = false
			return n, true
		}
		switch v := n.(type) {
		case ast.NodeTypeVariable:
			if v.Name == "context" {
				ok = false
			}
			return n, true
		case ast.NodeTypeExtensionCall:
			return n, true
		case ast.NodeTypeHasTag:
			b, kept := tagged(v.BinaryNode)
			return ast.NodeTypeHasTag{BinaryNode: b}, kept
		case ast.NodeTypeGetTag:
			b, kept := tagged(v.BinaryNode)
			return ast.NodeTypeGetTag{BinaryNode: b}, kept
		case ast.NodeTypeLike:
			patterns = append(patterns, v.Value)
			return ast.NodeTypeLike{Arg: rewrite(v.Arg, slot), Value: types.NewPattern(PatternSlot(len(patterns) - 1))}, true
		case ast.NodeValue:
			if holdsMarker(v.Value) {
				ok = false
				return n, true
			}
			values = append(values, v.Value)
			return contextRead(len(values) - 1), true
		}
		return nil, false
	}
	template = rewrite(n, slot)
	if !ok {
		return nil, nil, nil, false
	}
	return template, values, patterns, true
}

// Instantiate is the expression a template (Template) stands for with the
// given context: each `context.v<i>` read replaced by its value. A read of a
// slot the context lacks is kept. Placeholder patterns are kept: put them
// back first (InstantiatePatterns).
func Instantiate(template ast.IsNode, context types.Record) ast.IsNode {
	return rewrite(template, func(n ast.IsNode) (ast.IsNode, bool) {
		acc, isAccess := n.(ast.NodeTypeAccess)
		if !isAccess {
			return nil, false
		}
		if v, isVar := acc.Arg.(ast.NodeTypeVariable); !isVar || v.Name != "context" {
			return nil, false
		}
		if val, found := context.Get(acc.Value); found {
			return ast.NodeValue{Value: val}, true
		}
		return n, true
	})
}

// InstantiatePatterns is template with each placeholder pattern "p<i>"
// replaced by patterns[i]. Every `like` of a template is a placeholder: one
// that is not, or whose pattern is not given, is an error.
func InstantiatePatterns(template ast.IsNode, patterns []types.Pattern) (ast.IsNode, error) {
	var err error
	out := rewrite(template, func(n ast.IsNode) (ast.IsNode, bool) {
		like, isLike := n.(ast.NodeTypeLike)
		if !isLike || err != nil {
			return nil, false
		}
		i, ok := patternSlotIndex(like.Value)
		if !ok || i >= len(patterns) {
			err = fmt.Errorf("pattern %s is not one of the %d patterns given", like.Value.MarshalCedar(), len(patterns))
			return n, true
		}
		arg, argErr := InstantiatePatterns(like.Arg, patterns)
		if argErr != nil {
			err = argErr
		}
		return ast.NodeTypeLike{Arg: arg, Value: patterns[i]}, true
	})
	return out, err
}

// patternSlotIndex is i for the placeholder pattern "p<i>" (PatternSlot).
func patternSlotIndex(p types.Pattern) (int, bool) {
	name, err := strconv.Unquote(string(p.MarshalCedar()))
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(name, "p")
	i, err := strconv.Atoi(digits)
	return i, ok && err == nil && i >= 0 && PatternSlot(i) == name
}

func contextRead(i int) ast.IsNode {
	return ast.NodeTypeAccess{StrOpNode: ast.StrOpNode{Arg: ast.NodeTypeVariable{Name: "context"}, Value: types.String(TemplateSlot(i))}}
}

// holdsMarker reports whether v is or holds one of partial evaluation's
// entities (variables, ignored values): they stand for something unknown,
// not a constant.
func holdsMarker(v types.Value) bool {
	switch v := v.(type) {
	case types.EntityUID:
		return strings.HasPrefix(string(v.Type), "__cedar::")
	case types.Set:
		for e := range v.All() {
			if holdsMarker(e) {
				return true
			}
		}
	case types.Record:
		for _, e := range v.All() {
			if holdsMarker(e) {
				return true
			}
		}
	}
	return false
}
