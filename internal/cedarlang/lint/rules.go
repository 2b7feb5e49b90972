package lint

import (
	"fmt"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// lint finds valid policies that cannot do what they seem to.
func (c *Checker) lint(ps *policySource) []Diagnostic {
	var out []Diagnostic
	p := ps.p.AST
	for _, cond := range p.Conditions {
		ast.Inspect(ast.NewNode(cond.Body), func(n ast.IsNode) bool {
			switch v := n.(type) {
			case ast.NodeTypeEquals:
				if (isStar(v.Left) || isStar(v.Right)) && !isSubresource(v.Left) && !isSubresource(v.Right) {
					out = append(out, ps.diag(Warning, CodeWildcardCompare,
						`comparing to "*" never holds: "*" is not a wildcard in Cedar, and an open namespace or name is unknown, never "*"`,
						"to mean any value, leave the condition out", ps.find(`"*"`)))
				}
			case ast.NodeTypeNotEquals:
				if (isStar(v.Left) || isStar(v.Right)) && !isSubresource(v.Left) && !isSubresource(v.Right) {
					out = append(out, ps.diag(Warning, CodeWildcardCompare,
						`comparing to "*" with != always holds: "*" is not a wildcard in Cedar`,
						"to mean any value, leave the condition out", ps.find(`"*"`)))
				}
			case ast.NodeTypeIs:
				out = append(out, c.checkIsType(ps, v.EntityType)...)
			case ast.NodeTypeIsIn:
				out = append(out, c.checkIsType(ps, v.EntityType)...)
			case ast.NodeTypeLike:
				if matchesAll(v.Value) {
					out = append(out, ps.diag(Warning, CodeLikeAll,
						`like "*" matches every string: the condition always holds`,
						"drop it (or test presence with `has`)", ps.find("like")))
				}
			}
			return true
		})
	}
	if ps.p.Effect == types.Forbid {
		if what, needle := canError(p); what != "" {
			out = append(out, ps.diag(Warning, CodeForbidCanError,
				"this forbid can fail to evaluate ("+what+"); Cedar skips a policy that errors, which would fail open; kcedar denies instead (fail closed), so an error here denies every request the forbid applies to",
				"make the condition total: guard with has/hasTag, avoid arithmetic and extension calls on values from the request", ps.find(needle)))
		}
	}
	out = append(out, typedReadingDiagnostics(ps)...)
	out = append(out, c.neverHasDiagnostics(ps)...)
	if ps.p.Effect == types.Permit && ps.p.UsesObjects && onlyReads(p) && !c.connectScope(p) {
		out = append(out, ps.diag(Warning, CodeReadConditional,
			"this permit depends on resource.object/oldObject but applies only to get: a get has no admission and no label selector, so the object is never known and the permit never allows anything",
			"write conditions on objects for create/update/patch/delete, or on object labels for list/watch (confined by label selectors); constrain gets by resource.namespace and resource.name", ps.find("action")))
	}
	return out
}

// checkIsType warns about `x is T` in a condition with a type the schema
// does not have: Cedar accepts it, and it never holds.
func (c *Checker) checkIsType(ps *policySource, t types.EntityType) []Diagnostic {
	if _, ok := c.resolved.Entities[t]; ok {
		return nil
	}
	hint := ""
	if m := c.closestType(string(t)); m != "" {
		hint = "did you mean " + m + "?"
	}
	return []Diagnostic{ps.diag(Warning, CodeUnknownType, fmt.Sprintf("%s is not an entity type of the schema: `is %s` never holds", t, t), hint, ps.find("is "+string(t)))}
}

// isSubresource reports whether n is `<x>.subresource`: kcedar reads a
// SubjectAccessReview's subresource "*" literally (as RBAC does), so comparing
// it to "*" is meaningful.
func isSubresource(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	return ok && a.Value == schemagen.AttrSubresource
}

func isStar(n ast.IsNode) bool {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return false
	}
	s, ok := v.Value.(types.String)
	return ok && s == "*"
}

func matchesAll(p types.Pattern) bool {
	s := strings.Trim(string(p.MarshalCedar()), `"`)
	return s != "" && strings.Trim(s, "*") == ""
}

// canError reports whether a policy's conditions may fail to evaluate once
// validated (see internal/engine/simplify.go canError) and a text to point at.
func canError(p *ast.Policy) (what, needle string) {
	for _, cond := range p.Conditions {
		ast.Inspect(ast.NewNode(cond.Body), func(n ast.IsNode) bool {
			if what != "" {
				return false
			}
			switch v := n.(type) {
			case ast.NodeTypeAdd:
				what, needle = "arithmetic can overflow", "+"
			case ast.NodeTypeSub:
				what, needle = "arithmetic can overflow", "-"
			case ast.NodeTypeMult:
				what, needle = "arithmetic can overflow", "*"
			case ast.NodeTypeNegate:
				what, needle = "negation can overflow", "-"
			case ast.NodeTypeGetTag:
				if !hasTagGuard(p) {
					what, needle = "getTag of a missing tag", "getTag"
				}
			case ast.NodeTypeExtensionCall:
				switch v.Name {
				case "ip", "decimal", "datetime", "duration":
					// Constructors: literal arguments are checked when the
					// policy loads; anything else may not parse.
					for _, a := range v.Args {
						if _, lit := a.(ast.NodeValue); !lit {
							what, needle = "extension constructor "+string(v.Name)+" on a value that may not parse", string(v.Name)
						}
					}
				case "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual",
					"isIpv4", "isIpv6", "isLoopback", "isMulticast", "isInRange",
					"toTime", "toDays", "toHours", "toMinutes", "toSeconds", "toMilliseconds":
				default:
					what, needle = "extension call "+string(v.Name)+" can fail", string(v.Name)
				}
			case ast.NodeTypeAccess:
				if lit, ok := v.Arg.(ast.NodeValue); ok {
					if _, isEntity := lit.Value.(types.EntityUID); isEntity {
						what, needle = "attribute of an entity literal, which may not exist", "."+string(v.Value)
					}
				}
			}
			return what == ""
		})
	}
	return what, needle
}

func hasTagGuard(p *ast.Policy) bool {
	found := false
	for _, cond := range p.Conditions {
		ast.Inspect(ast.NewNode(cond.Body), func(n ast.IsNode) bool {
			if _, ok := n.(ast.NodeTypeHasTag); ok {
				found = true
			}
			return !found
		})
	}
	return found
}

// readVerbs are the reads that never know an object: a get (list and watch
// may carry a label selector, which confines their objects).
var readVerbs = map[types.String]bool{"get": true}

// onlyReads reports whether the action scope names read verbs only.
func onlyReads(p *ast.Policy) bool {
	var uids []types.EntityUID
	switch s := p.Action.(type) {
	case ast.ScopeTypeEq:
		uids = []types.EntityUID{s.Entity}
	case ast.ScopeTypeInSet:
		uids = s.Entities
	default:
		return false
	}
	for _, u := range uids {
		if u.Type != schemagen.ActionType || !readVerbs[u.ID] {
			return false
		}
	}
	return len(uids) > 0
}

// connectScope reports whether the resource scope is a connect subresource
// (pods/exec, ...): there a get is admitted with its options object.
func (c *Checker) connectScope(p *ast.Policy) bool {
	t, ok := cedarlang.ScopeResourceType(p.Resource)
	if !ok {
		return false
	}
	r, ok := c.byType[t]
	return ok && r.IsConnect()
}
