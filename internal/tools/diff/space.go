package diff

import (
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Fresh values: strings no policy compares with (checked against the
// literals, see fresh). Each stands for "any other value".
const (
	freshValue  = "kcedar-other"
	freshValue2 = "kcedar-other-2"
	freshGroup  = "kcedar-other-group"
)

// dimension is one request dimension's representatives: its literals,
// strings built to match and miss its like patterns, and fresh values. A
// value is represented by the literal it equals, else by the representative
// that matches the same patterns.
type dimension struct {
	reps     []string
	literal  map[string]bool
	patterns []types.Pattern
	fresh    string
}

// newDimension builds a dimension's representatives from its literals and
// patterns; cross: it is compared with another attribute, so it gets a
// second fresh value (both "equal" and "different" occur).
func newDimension(literals []string, patterns []types.Pattern, cross bool) *dimension {
	dim := &dimension{literal: map[string]bool{}, patterns: patterns}
	set := map[string]bool{}
	for _, v := range literals {
		dim.literal[v] = true
		set[v] = true
	}
	for _, p := range dim.patterns {
		for _, s := range likeStrings(p) {
			set[s] = true
		}
	}
	dim.fresh = dim.unused(freshValue)
	set[dim.fresh] = true
	if cross {
		set[dim.unused(freshValue2)] = true
	}
	dim.reps = sortedKeys(set)
	return dim
}

// unused is base, made longer until it equals no literal.
func (d *dimension) unused(base string) string {
	for d.literal[base] {
		base += "-x"
	}
	return base
}

// signature is which patterns v matches.
func (d *dimension) signature(v string) string {
	sig := make([]byte, len(d.patterns))
	for i, p := range d.patterns {
		sig[i] = '0'
		if p.Match(types.String(v)) {
			sig[i] = '1'
		}
	}
	return string(sig)
}

// classify is the representative of v: v if it is a representative, else
// the non-literal representative matching the same patterns; ok is false
// when none does (a value the enumeration did not cover).
func (d *dimension) classify(v string) (string, bool) {
	if d.literal[v] {
		return v, true
	}
	if _, found := slices.BinarySearch(d.reps, v); found {
		return v, true
	}
	sig := d.signature(v)
	for _, r := range d.reps {
		if !d.literal[r] && d.signature(r) == sig {
			return r, true
		}
	}
	return "", false
}

// space is what the enumeration fixes for the whole comparison: the
// schema's resources by type, the representatives of the dimensions that
// choose a target (API group, resource, subresource, from the literals of
// every relevant policy), and, where the reach is every type, the type
// representing each shape of resource no policy names.
type space struct {
	dims map[string]*dimension
	// typed maps entity types to the schema's resources.
	typed map[types.EntityType]*schemagen.Resource
	// shapeRep is, for each resource type no policy names, the type that
	// represents its shape (set when the reach is every type).
	shapeRep map[types.EntityType]types.EntityType
}

// targetDims are the dimensions space fixes.
var targetDims = []string{dimAPIGroup, dimResource, dimSubresource}

func newSpace(s *schemagen.Schema, l *literals) *space {
	sp := &space{dims: map[string]*dimension{}, typed: map[types.EntityType]*schemagen.Resource{}, shapeRep: map[types.EntityType]types.EntityType{}}
	for _, d := range targetDims {
		sp.dims[d] = newDimension(l.values(d), l.patterns(d), l.crossDims[d])
	}
	for _, r := range s.Resources {
		sp.typed[r.EntityType] = r
	}
	return sp
}

// IsOther reports whether v is one of the fresh values a region lists: it
// stands for any value no policy names there.
func IsOther(v string) bool {
	return strings.HasPrefix(v, freshValue)
}
