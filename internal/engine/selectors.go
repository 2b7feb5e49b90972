package engine

import (
	"github.com/cedar-policy/cedar-go/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Label selectors confine reads (KEP-4601). A list or watch is about the
// objects it returns, which a read's SubjectAccessReview does not carry:
// without a label selector `resource.object` is absent for reads (as
// always). With one, the listed objects are an unknown `resource.object`
// constrained by the selector: each policy reading objects is partially
// evaluated with the object unknown, and its residual is decided under the
// labels the selector fixes (`k=v`, `k in (...)`: getTag and hasTag;
// `k`: hasTag). A permit allows only if its residual holds for every
// assignment the selector admits and no longer reads the object; a forbid
// denies if it may hold (or fails) for one of them, or still reads the
// object. `!=`, `notin` and `!k` are ignored, which can only make the set of
// admitted objects larger: they never widen what is allowed.
type labelConstraints struct {
	exists map[string]bool     // keys every admitted object has
	values map[string][]string // keys whose value is one of these
}

// maxSelectorCombinations bounds the assignments tried; a selector with more
// leaves its residuals undecided (not allowed; a forbid denies).
const maxSelectorCombinations = 256

// selectorConstraints returns the constraints of req's label selector for
// verb, or nil when it does not confine the objects (not a list or watch of
// a typed resource with objects, or no selector). A selector of only
// negative requirements still makes the objects unknown (unconstrained).
func selectorConstraints(req *entities.Request, verb string, target entities.Target) *labelConstraints {
	if verb != "list" && verb != "watch" || target.Resource == nil || len(target.Resource.Versions) == 0 || len(req.LabelSelector) == 0 {
		return nil
	}
	c := &labelConstraints{exists: map[string]bool{}, values: map[string][]string{}}
	for _, r := range req.LabelSelector {
		switch r.Op {
		case metav1.LabelSelectorOpIn:
			if len(r.Values) == 0 {
				continue
			}
			c.exists[r.Key] = true
			if prev, ok := c.values[r.Key]; ok {
				c.values[r.Key] = intersect(prev, r.Values)
			} else {
				c.values[r.Key] = dedupe(r.Values)
			}
		case metav1.LabelSelectorOpExists:
			c.exists[r.Key] = true
		}
	}
	return c
}

func dedupe(vs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, v := range b {
		in[v] = true
	}
	var out []string
	for _, v := range a {
		if in[v] {
			out = append(out, v)
		}
	}
	return out
}

// assignments lists every choice of one value per constrained key (nil if
// there are too many; an empty list if the selector admits nothing).
func (c *labelConstraints) assignments() []map[string]string {
	out := []map[string]string{{}}
	for k, vs := range c.values {
		if len(vs) == 0 {
			return []map[string]string{}
		}
		if len(out)*len(vs) > maxSelectorCombinations {
			return nil
		}
		next := make([]map[string]string, 0, len(out)*len(vs))
		for _, a := range out {
			for _, v := range vs {
				m := make(map[string]string, len(a)+1)
				for k2, v2 := range a {
					m[k2] = v2
				}
				m[k] = v
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

// decide decides p's residual expr (with resource.object unknown) over the
// objects the selector admits: true, false, an error, or expr itself when
// it cannot be decided.
// unknown lists the other resource attributes that are unknown (variables:
// an open name, an unknown namespaceObject); a residual still reading one is
// undecided too.
func (c *labelConstraints) decide(p *cedarlang.Policy, expr ast.IsNode, env eval.Env, unknown map[string]bool) ast.IsNode {
	if _, known := boolValue(expr); known || isError(expr) {
		return expr
	}
	as := c.assignments()
	if as == nil {
		return expr
	}
	permit := p.Effect == types.Permit
	allTrue := true
	for _, a := range as {
		sub := rewrite(expr, func(n ast.IsNode) (ast.IsNode, bool) { return c.substitute(n, a) })
		if readsUnknownAttr(sub, unknown) {
			return expr // still depends on the objects
		}
		v, err := eval.Eval(sub, env)
		b, isBool := v.(types.Boolean)
		switch {
		case err != nil || !isBool:
			if err == nil {
				err = errorf("not a boolean")
			}
			if !permit {
				return eval.PartialError(err) // a forbid that fails for an admitted object denies
			}
			allTrue = false
		case bool(b):
			if !permit {
				return ast.NodeValue{Value: types.True}
			}
		default:
			allTrue = false
		}
	}
	if permit && allTrue && len(as) > 0 {
		return ast.NodeValue{Value: types.True}
	}
	return ast.NodeValue{Value: types.False}
}

// labelsOf recognizes resource.object.metadata.labels.
func isObjectLabels(n ast.IsNode) bool {
	l, ok := n.(ast.NodeTypeAccess)
	return ok && l.Value == "labels" && isObjectMetadata(l.Arg)
}

func isObjectMetadata(n ast.IsNode) bool {
	m, ok := n.(ast.NodeTypeAccess)
	if !ok || m.Value != schemagen.AttrMetadata {
		return false
	}
	o, ok := m.Arg.(ast.NodeTypeAccess)
	if !ok || o.Value != schemagen.AttrObject {
		return false
	}
	r, ok := o.Arg.(ast.NodeTypeVariable)
	return ok && r.Name == "resource"
}

func stringLit(n ast.IsNode) (string, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return "", false
	}
	s, ok := v.Value.(types.String)
	return string(s), ok
}

// substitute replaces what the selector fixes in one node.
func (c *labelConstraints) substitute(n ast.IsNode, a map[string]string) (ast.IsNode, bool) {
	switch v := n.(type) {
	case ast.NodeTypeHas:
		if v.Value == "labels" && isObjectMetadata(v.Arg) && len(c.exists) > 0 {
			return ast.NodeValue{Value: types.True}, true // some label is required
		}
		if r, ok := v.Arg.(ast.NodeTypeVariable); ok && r.Name == "resource" && v.Value == schemagen.AttrObject {
			return ast.NodeValue{Value: types.True}, true // every listed object exists
		}
	case ast.NodeTypeHasTag:
		if k, ok := stringLit(v.Right); ok && isObjectLabels(v.Left) && c.exists[k] {
			return ast.NodeValue{Value: types.True}, true
		}
	case ast.NodeTypeGetTag:
		if k, ok := stringLit(v.Right); ok && isObjectLabels(v.Left) {
			if val, fixed := a[k]; fixed {
				return ast.NodeValue{Value: types.String(val)}, true
			}
		}
	}
	return nil, false
}

// unknownAttrs lists the resource attributes whose value is a variable.
func unknownAttrs(attrs types.RecordMap) map[string]bool {
	out := map[string]bool{}
	for k, v := range attrs {
		if _, isVar := eval.ToVariable(v); isVar {
			out[string(k)] = true
		}
	}
	return out
}

// readsUnknownAttr reports whether n still reads resource.object (or
// oldObject) or an attribute in unknown, or uses resource as a whole.
func readsUnknownAttr(n ast.IsNode, unknown map[string]bool) bool {
	found := false
	rewrite(n, func(c ast.IsNode) (ast.IsNode, bool) {
		if found {
			return c, true
		}
		switch v := c.(type) {
		case ast.NodeTypeAccess:
			if r, ok := v.Arg.(ast.NodeTypeVariable); ok && r.Name == "resource" {
				found = v.Value == schemagen.AttrObject || v.Value == schemagen.AttrOldObject || unknown[string(v.Value)]
				return c, true
			}
		case ast.NodeTypeHas:
			if r, ok := v.Arg.(ast.NodeTypeVariable); ok && r.Name == "resource" {
				found = v.Value == schemagen.AttrObject || v.Value == schemagen.AttrOldObject || unknown[string(v.Value)]
				return c, true
			}
		case ast.NodeTypeVariable:
			if v.Name == "resource" {
				// resource as a whole value holds the unknown object
				found = true
				return c, true
			}
		}
		return nil, false
	})
	return found
}
