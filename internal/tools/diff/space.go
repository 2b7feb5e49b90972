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

// newDimension builds dimension d's representatives from the literals.
func newDimension(l *literals, d string) *dimension {
	dim := &dimension{literal: map[string]bool{}, patterns: l.patterns(d)}
	for _, v := range l.values(d) {
		dim.literal[v] = true
	}
	set := map[string]bool{}
	for v := range dim.literal {
		set[v] = true
	}
	for _, p := range dim.patterns {
		for _, s := range likeStrings(p) {
			set[s] = true
		}
	}
	dim.fresh = dim.unused(freshValue)
	set[dim.fresh] = true
	if l.crossDims[d] {
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
	if slices.Contains(d.reps, v) || d.literal[v] {
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

// space is the finite set of representative values of every dimension,
// built from the literals of the relevant policies.
type space struct {
	dims   map[string]*dimension
	groups []string
	// typed maps entity types to the schema's resources.
	typed map[types.EntityType]*schemagen.Resource
	// shapeRep is, for each resource type no policy names, the type that
	// represents its shape (set when the reach is every type).
	shapeRep map[types.EntityType]types.EntityType
	// nsKeys are the namespace label keys the policies name, otherLabel a
	// key none names (nslabels.go).
	nsKeys     []string
	otherLabel string
	// selectorNames: a policy reads resource.named, so a name from a field
	// selector is its own class (names "metadata.name=N").
	selectorNames bool
}

func newSpace(s *schemagen.Schema, l *literals) *space {
	sp := &space{dims: map[string]*dimension{}, groups: l.groups(), typed: map[types.EntityType]*schemagen.Resource{}, shapeRep: map[types.EntityType]types.EntityType{}}
	for _, d := range stringDims {
		sp.dims[d] = newDimension(l, d)
	}
	sp.nsKeys = sortedKeys(l.nsKeys)
	for _, k := range sp.nsKeys {
		sp.dims[nsLabelDim(k)] = newDimension(l, nsLabelDim(k))
	}
	sp.otherLabel = (&dimension{literal: l.nsKeys}).unused(freshValue + "-label")
	sp.selectorNames = l.readsNamed
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
