package engine

import (
	"fmt"
	"strings"

	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
)

// errorEntity stands for an evaluation error partial evaluation found: reading
// an attribute of an entity that never exists fails at callback time, as the
// original expression would have.
const errorEntity types.EntityType = "k8s::EvaluationError"

const policyHead = "permit ( principal, action, resource )\nwhen { "

// ExprText prints a residual expression as Cedar text.
func ExprText(n ast.IsNode) (string, error) {
	n = replaceErrors(n)
	p := ast.Permit().When(ast.NewNode(n))
	text := string((*cedarast.Policy)(p).MarshalCedar())
	if !strings.HasPrefix(text, policyHead) || !strings.HasSuffix(text, " };") {
		return "", fmt.Errorf("unexpected policy text %q", text)
	}
	return text[len(policyHead) : len(text)-len(" };")], nil
}

// ParseExpr parses an expression printed by ExprText.
func ParseExpr(text string) (ast.IsNode, error) {
	src := []byte(policyHead + text + " };")
	policies, err := cedarlang.ParsePolicies("condition", src)
	if err != nil {
		return nil, err
	}
	if len(policies) != 1 || len(policies[0].AST.Conditions) != 1 || len(policies[0].AST.Annotations) != 0 {
		return nil, fmt.Errorf("condition is not a single expression")
	}
	return policies[0].AST.Conditions[0].Body, nil
}

// replaceErrors rewrites partial errors (which Cedar cannot parse) into an
// expression that fails the same way when evaluated.
func replaceErrors(n ast.IsNode) ast.IsNode {
	return rewrite(n, func(n ast.IsNode) (ast.IsNode, bool) {
		if err, ok := eval.ToPartialError(n); ok {
			msg := err.Error()
			if len(msg) > 120 {
				msg = msg[:120]
			}
			return ast.NodeTypeAccess{StrOpNode: ast.StrOpNode{Arg: ast.NodeValue{Value: types.NewEntityUID(errorEntity, types.String(msg))}, Value: "failed"}}, true
		}
		return nil, false
	})
}
