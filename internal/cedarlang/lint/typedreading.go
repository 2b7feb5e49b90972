package lint

import (
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// CodeTypedReadingFailOpen: a forbid's when (or a permit's unless) requires
// a typed reading (k8s::Quantity, k8s::IntOrString) to be representable, so
// a value that is present but not representable escapes the forbid (or is
// granted by the permit).
const CodeTypedReadingFailOpen = "typed-reading-fail-open"

// typedReadingHint is the fail-closed idiom.
const typedReadingHint = "fail closed: forbid (...) when { <field present> } unless { <field present> && q has milli && q.milli <= 4000 }; " +
	"a value that is present but not representable then denies (in a permit, require the reading in when, not unless)"

// representableHas are the optional attributes of a typed reading that are
// present only when the value is representable: `q has milli` reads as "q is
// representable".
var representableHas = map[types.String]bool{
	schemagen.AttrMilli:   true,
	schemagen.AttrIntVal:  true,
	schemagen.AttrPercent: true,
}

// representableFlag are the Boolean attributes of a typed reading that are
// true only when the value is representable (or an integer).
var representableFlag = map[types.String]bool{
	schemagen.AttrValid: true,
	schemagen.AttrIsInt: true,
}

// failOpenTest is a representability test found in the fail-open direction:
// `has <attr>` (has true) or `.<attr>` (has false), the nth such test of attr
// in the policy's conditions in source order (counting every receiver and
// polarity), so it can be found in the text.
type failOpenTest struct {
	attr types.String
	has  bool
	nth  int
}

// polarity is how a subexpression counts toward its clause: positive when it
// holding makes the clause hold (an even number of negations above it),
// negative when an odd number, both when it can be either.
type polarity uint8

const (
	positive polarity = 1 << iota
	negative
	bothPolarities = positive | negative
)

// flip is the polarity under one more negation.
func (p polarity) flip() polarity { return p&positive<<1 | p&negative>>1 }

// typedReadingFailOpen finds the representability tests of typed readings in
// positive polarity in a forbid's when clauses and a permit's unless clauses:
// there a value that is present but not representable makes the forbid not
// apply, or the permit grant.
func typedReadingFailOpen(p *ast.Policy) []failOpenTest {
	w := &readingWalk{counts: map[readingKey]int{}}
	for _, cond := range p.Conditions {
		failOpen := (p.Effect == ast.EffectForbid) == (cond.Condition == ast.ConditionWhen)
		w.report = failOpen
		w.walk(cond.Body, positive)
	}
	return w.found
}

// readingKey counts tests of one kind (has or access) of one attribute.
type readingKey struct {
	attr types.String
	has  bool
}

// readingWalk walks conditions in source order, numbering the tests of each
// readingKey and collecting those in positive polarity when report is set.
type readingWalk struct {
	report bool
	counts map[readingKey]int
	found  []failOpenTest
}

// walk visits n, whose polarity in its clause is pol, and its subexpressions.
func (w *readingWalk) walk(n ast.IsNode, pol polarity) {
	switch v := n.(type) {
	case ast.NodeTypeNot:
		w.walk(v.Arg, pol.flip())
	case ast.NodeTypeAnd:
		w.walk(v.Left, pol)
		w.walk(v.Right, pol)
	case ast.NodeTypeOr:
		w.walk(v.Left, pol)
		w.walk(v.Right, pol)
	case ast.NodeTypeIfThenElse:
		w.walk(v.If, bothPolarities)
		w.walk(v.Then, pol)
		w.walk(v.Else, pol)
	case ast.NodeTypeHas:
		w.walk(v.Arg, bothPolarities)
		w.test(readingKey{attr: v.Value, has: true}, representableHas[v.Value] && isTypedReading(v.Arg), pol)
	case ast.NodeTypeAccess:
		w.walk(v.Arg, bothPolarities)
		w.test(readingKey{attr: v.Value}, representableFlag[v.Value] && isTypedReading(v.Arg), pol)
	case ast.NodeTypeEquals:
		w.compareBool(v.Left, v.Right, pol)
	case ast.NodeTypeNotEquals:
		w.compareBool(v.Left, v.Right, pol.flip())
	default:
		w.children(n)
	}
}

// compareBool walks `left == right` (pol) or `left != right` (pol flipped):
// against the literal true a side keeps pol, against false it is negated,
// and otherwise it can count either way.
func (w *readingWalk) compareBool(left, right ast.IsNode, pol polarity) {
	side := func(other ast.IsNode) polarity {
		lit, ok := other.(ast.NodeValue)
		if b, isBool := lit.Value.(types.Boolean); ok && isBool {
			if b {
				return pol
			}
			return pol.flip()
		}
		return bothPolarities
	}
	w.walk(left, side(right))
	w.walk(right, side(left))
}

// children walks the direct subexpressions of n, which can count either way.
func (w *readingWalk) children(n ast.IsNode) {
	root := true // Inspect visits n first, then its children
	ast.Inspect(ast.NewNode(n), func(c ast.IsNode) bool {
		if root {
			root = false
			return true
		}
		w.walk(c, bothPolarities)
		return false
	})
}

// test numbers one test of key and records it when it is a representability
// test in positive polarity of a clause that fails open.
func (w *readingWalk) test(key readingKey, representability bool, pol polarity) {
	nth := w.counts[key]
	w.counts[key]++
	if w.report && representability && pol&positive != 0 {
		w.found = append(w.found, failOpenTest{attr: key.attr, has: key.has, nth: nth})
	}
}

// isTypedReading reports whether n reads a typed reading, by kcedar's names:
// an attribute `<field>Quantity` or `<field>IntOrString`, or a tag of a map
// of them (`limitsQuantity.getTag("cpu")`,
// `effectiveResources.limits.getTag("cpu")`).
func isTypedReading(n ast.IsNode) bool {
	if g, ok := n.(ast.NodeTypeGetTag); ok {
		n = g.Left
		if isEffectiveResources(n) {
			return true
		}
	}
	a, ok := n.(ast.NodeTypeAccess)
	if !ok {
		return false
	}
	name := string(a.Value)
	for _, suffix := range []string{schemagen.QuantitySuffix, schemagen.IntOrStringSuffix} {
		if len(name) > len(suffix) && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// isEffectiveResources reports whether n is `<x>.effectiveResources.limits`
// or `.requests`: a Pod's maps of quantities.
func isEffectiveResources(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	if !ok || (a.Value != schemagen.AttrLimits && a.Value != schemagen.AttrRequests) {
		return false
	}
	er, ok := a.Arg.(ast.NodeTypeAccess)
	return ok && er.Value == schemagen.AttrEffectiveResources
}

// typedReadingDiagnostics warns about each fail-open representability test
// of ps, at its `has` (or attribute).
func typedReadingDiagnostics(ps *policySource) []Diagnostic {
	var out []Diagnostic
	for _, t := range typedReadingFailOpen(ps.p.AST) {
		test, at := "`."+string(t.attr)+"`", ps.findNth("."+string(t.attr), t.nth)
		if at >= 0 {
			at++ // the attribute's name, after the dot
		}
		if t.has {
			test, at = "`has "+string(t.attr)+"`", ps.findHas(string(t.attr), t.nth)
		}
		msg := "this forbid's when clause requires a typed reading to be representable (" + test + "): a value that is present but not representable makes the forbid not apply, so it fails open"
		if ps.p.Effect == types.Permit {
			msg = "this permit's unless clause requires a typed reading to be representable (" + test + "): a value that is present but not representable makes the permit grant, so it fails open"
		}
		out = append(out, ps.diag(Warning, CodeTypedReadingFailOpen, msg, typedReadingHint, at))
	}
	return out
}
