package cedarlang

import (
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Tags: the user's extra (principal.hasTag("k"), principal.getTag("k")) and
// the labels of the request's namespace
// (resource.namespaceObject.metadata.labels.hasTag / getTag) are keyed on
// the set-valued dimensions dExtra and dLabel. A value is the tag's key and
// one of its values ("k\x00v"); a key alone ("k\x01") is what hasTag needs.
//
//   - principal.getTag("k").contains("v"), .containsAny([...]),
//     [...].containsAny(principal.getTag("k")) and .containsAll([...]) need
//     the principal to have those (k, v);
//   - labels.getTag("k") == "v" and ["a", "b"].contains(labels.getTag("k"))
//     need the namespace to carry one of those labels;
//   - hasTag("k") needs the key.
//
// Errors: getTag fails when the tag is absent, and reading the labels when
// namespaceObject or its labels are. A permit that fails does not match, so
// any of these may narrow it. A forbid that fails denies, so a forbid is
// narrowed by them only when earlier top-level conjuncts guard every read
// (`resource has namespaceObject`, `resource.namespaceObject.metadata has
// labels`, `hasTag("k")` before getTag("k")); an unguarded one ends what the
// forbid relies on.

const (
	tagValueSep = "\x00" // "k\x00v": the tag k has the value v
	tagKeyMark  = "\x01" // "k\x01": the tag k is present
)

// nsLabelsPath is the path of the namespace's labels in a policy.
var nsLabelsPath = "resource." + schemagen.AttrNamespaceObject + "." + schemagen.AttrMetadata + ".labels"

// TagValue is the value a set-valued tag dimension holds for the tag k
// with the value v.
func tagValue(k, v string) string { return k + tagValueSep + v }

func tagKey(k string) string { return k + tagKeyMark }

// pathOf is n as a dotted path ("resource.namespaceObject.metadata") when
// it is a variable or a chain of attribute reads from one.
func pathOf(n ast.IsNode) (string, bool) {
	switch v := n.(type) {
	case ast.NodeTypeVariable:
		return string(v.Name), true
	case ast.NodeTypeAccess:
		p, ok := pathOf(v.Arg)
		return p + "." + string(v.Value), ok
	}
	return "", false
}

// noteGuard records what a top-level conjunct guards for the conjuncts after
// it: `X has a` guards X.a, `X.hasTag("k")` guards X's tag k.
func (x *extractor) noteGuard(n ast.IsNode) {
	switch v := n.(type) {
	case ast.NodeTypeHas:
		if p, ok := pathOf(v.Arg); ok {
			x.guards[p+"."+string(v.Value)] = true
		}
	case ast.NodeTypeHasTag:
		p, okP := pathOf(v.Left)
		k, okK := literalString(v.Right)
		if okP && okK {
			x.guards[p+"#"+k] = true
		}
	}
}

// tagOwner is the dimension of the tags of n (the principal's, or the
// namespace's labels) and whether reading n itself may fail.
func (x *extractor) tagOwner(n ast.IsNode) (dim uint8, mayFail, ok bool) {
	p, isPath := pathOf(n)
	switch {
	case !isPath:
		return 0, false, false
	case p == "principal":
		return dExtra, false, true
	case p == nsLabelsPath:
		// metadata is a required attribute of an object record.
		guarded := x.guards["resource."+schemagen.AttrNamespaceObject] && x.guards[nsLabelsPath]
		return dLabel, !guarded, true
	}
	return 0, false, false
}

// tagRead recognizes `<owner>.getTag("k")`: its dimension, the key, and
// whether the read may fail.
func (x *extractor) tagRead(n ast.IsNode) (dim uint8, key string, mayFail, ok bool) {
	g, isGet := n.(ast.NodeTypeGetTag)
	if !isGet {
		return 0, "", false, false
	}
	dim, fail, isOwner := x.tagOwner(g.Left)
	k, isStr := literalString(g.Right)
	if !isOwner || !isStr {
		return 0, "", false, false
	}
	p, _ := pathOf(g.Left)
	return dim, k, fail || !x.guards[p+"#"+k], true
}

// tagConstraint is the constraint that dim holds one of key's values, or
// nothing for a forbid whose read may fail.
func (x *extractor) tagConstraint(dim uint8, key string, vals []string, mayFail bool) (cs []constraint, ok, fail bool) {
	if mayFail && x.forbid {
		return nil, false, false
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = tagValue(key, v)
	}
	return one(dim, out...), true, mayFail
}

// atomHasTag is atom for `<owner>.hasTag("k")`.
func (x *extractor) atomHasTag(v ast.NodeTypeHasTag) (cs []constraint, ok, mayFail bool) {
	dim, fail, isOwner := x.tagOwner(v.Left)
	k, isStr := literalString(v.Right)
	if !isOwner || !isStr || fail && x.forbid {
		return nil, false, false
	}
	return one(dim, tagKey(k)), true, fail
}

// atomTagEquals is atom for `labels.getTag("k") == "v"` (either side). The
// principal's tags are sets, never equal to a string: not extracted.
func (x *extractor) atomTagEquals(v ast.NodeTypeEquals) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		dim, key, fail, isTag := x.tagRead(lr[0])
		s, isStr := literalString(lr[1])
		if isTag && isStr && dim == dLabel {
			return x.tagConstraint(dim, key, []string{s}, fail)
		}
	}
	return nil, false, false
}

// atomTagContains is atom for principal.getTag("k").contains("v") and
// ["a", "b"].contains(labels.getTag("k")).
func (x *extractor) atomTagContains(v ast.NodeTypeContains) (cs []constraint, ok, mayFail bool) {
	if dim, key, fail, isTag := x.tagRead(v.Left); isTag && dim == dExtra {
		if s, isStr := literalString(v.Right); isStr {
			return x.tagConstraint(dim, key, []string{s}, fail)
		}
	}
	if dim, key, fail, isTag := x.tagRead(v.Right); isTag && dim == dLabel {
		if vals, isSet := literalStrings(v.Left); isSet {
			return x.tagConstraint(dim, key, vals, fail)
		}
	}
	return nil, false, false
}

// atomTagContainsAny is atom for principal.getTag("k").containsAny([...])
// and [...].containsAny(principal.getTag("k")).
func (x *extractor) atomTagContainsAny(v ast.NodeTypeContainsAny) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		dim, key, fail, isTag := x.tagRead(lr[0])
		vals, isSet := literalStrings(lr[1])
		if isTag && isSet && dim == dExtra {
			return x.tagConstraint(dim, key, vals, fail)
		}
	}
	return nil, false, false
}

// atomTagContainsAll is atom for principal.getTag("k").containsAll([...]):
// each value is needed.
func (x *extractor) atomTagContainsAll(v ast.NodeTypeContainsAll) (cs []constraint, ok, mayFail bool) {
	dim, key, fail, isTag := x.tagRead(v.Left)
	vals, isSet := literalStrings(v.Right)
	if !isTag || !isSet || dim != dExtra || len(vals) == 0 {
		return nil, false, false
	}
	for _, val := range vals {
		c, cok, _ := x.tagConstraint(dim, key, []string{val}, fail)
		if !cok {
			return nil, false, false
		}
		cs = append(cs, c...)
	}
	return cs, true, fail
}

// describeTags fills s's set-valued tag dimensions from q: the principal's
// extra is always known; the namespace's labels as q.NamespaceLabels says.
func (ix *index) describeTags(s *lookupState, q CandidateQuery) {
	s.has[dExtra] = true
	for k, vs := range q.Extra {
		s.multi[dExtra] = append(s.multi[dExtra], ix.hash(tagKey(k)))
		for _, v := range vs {
			s.multi[dExtra] = append(s.multi[dExtra], ix.hash(tagValue(k, v)))
		}
	}
	l := q.NamespaceLabels
	s.set(ix, dLabel, QueryValue{Has: l.State != LabelsAbsent, Open: l.State == LabelsUnknown, MayBeAbsent: l.State == LabelsUnknown})
	if l.State == LabelsUnknown {
		s.openMask |= 1 << dLabel
	}
	if l.State != LabelsKnown {
		return
	}
	for k, v := range l.Labels {
		kv := tagValue(k, v)
		s.multi[dLabel] = append(s.multi[dLabel], ix.hash(tagKey(k)), ix.hash(kv))
		if ix.labelAffixes {
			s.labels = append(s.labels, kv)
		}
	}
}

// QueryLabels is what a request knows of its namespace's labels.
type QueryLabels struct {
	State  LabelsState
	Labels map[string]string // when Known
}

// LabelsState: the request's namespace object is unknown (the zero value:
// every policy keyed on a label is a candidate), absent, or known.
type LabelsState uint8

const (
	LabelsUnknown LabelsState = iota
	LabelsAbsent
	LabelsKnown
)

// labelsOf is the default QueryLabels of a request on a target: absent
// where the entity has no namespaceObject or no namespace, else unknown
// (the engine fills what its namespace lookup knows).
func labelsOf(hasNamespaceObject bool, ns QueryValue) QueryLabels {
	if !hasNamespaceObject || !ns.Has {
		return QueryLabels{State: LabelsAbsent}
	}
	return QueryLabels{}
}

// KeysNamespaceLabels reports whether some policy of ps is keyed on a label
// of the request's namespace: only then does a lookup need the labels.
func (ps *PolicySet) KeysNamespaceLabels() bool {
	return ps.index != nil && ps.index.labelKeyed
}

// anyAmong reports whether one of hashes is among vs (32-bit value hashes).
func anyAmong(hashes []uint64, vs []uint32) bool {
	for _, h := range hashes {
		for _, v := range vs {
			if uint32(h) == v {
				return true
			}
		}
	}
	return false
}

// likeSuffix is the literal text a pattern ends with after its last
// wildcard ("" when it ends with one).
func likeSuffix(comps []any) string {
	if len(comps) < 2 {
		return ""
	}
	last, isLiteral := comps[len(comps)-1].(map[string]any)
	if !isLiteral {
		return ""
	}
	lit, _ := last["Literal"].(string)
	return lit
}

// MisKeyedForTest is ps with a deliberately wrong index: every constraint on
// the user's extra or the namespace's labels is keyed (and checked) under
// another value than the policy's. Differential tests use it to show that
// they catch a wrong key; nothing else may.
func (ps *PolicySet) MisKeyedForTest() *PolicySet {
	c := *ps
	ix := newIndex(^uint64(0), ^uint64(0))
	ix.misKeyTags = true
	c.index = ix.build(ps.Policies)
	return &c
}

// atomTagLike is atom for `labels.getTag("k") like "pattern"`: the
// namespace has the label k with a value the pattern matches (keyed on
// "k\x00" and the pattern's prefix, or its suffix, or a gram). The
// principal's tags are sets, never like a pattern: not extracted.
func (x *extractor) atomTagLike(v ast.NodeTypeLike) (cs []constraint, ok, mayFail bool) {
	dim, key, fail, isTag := x.tagRead(v.Arg)
	if !isTag || dim != dLabel || fail && x.forbid {
		return nil, false, false
	}
	cs = likeConstraints(dLabel, key+tagValueSep, true, v.Value)
	return cs, len(cs) > 0, fail
}

// residualErrorDims are the dimensions whose open value makes conjunct n a
// residual that may fail: a read of a namespace label (getTag), when the
// namespace's labels are unknown. Partial evaluation keeps such a residual
// before a false conjunct (`X && false` fails when X does), and a forbid
// that may fail denies: so a forbid's constraints after it rule it out only
// when the labels are known (they need dLabel).
func residualErrorDims(n ast.IsNode) uint16 {
	var dims uint16
	ast.Inspect(ast.NewNode(n), func(n ast.IsNode) bool {
		if g, isGet := n.(ast.NodeTypeGetTag); isGet {
			if p, ok := pathOf(g.Left); ok && p == nsLabelsPath {
				dims |= 1 << dLabel
			}
		}
		return dims == 0
	})
	return dims
}
