package cedarlang

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync/atomic"
)

// idIndex finds a set's policies by id. A set derived from another by a
// small change (NewPolicySetFrom) shares the other's base map, never
// written once built, and holds its changes in a small overlay, so the
// change costs what it changes rather than a map of every id.
type idIndex struct {
	base    map[string]*Policy
	overlay map[string]*Policy // changes since base: a nil value removes the id
}

// newIDIndex indexes policies by id; dups describes every id used twice.
func newIDIndex(policies []*Policy) (idIndex, error) {
	x := idIndex{base: make(map[string]*Policy, len(policies))}
	var dups []string
	for _, p := range policies {
		if prev, ok := x.base[p.ID]; ok {
			dups = append(dups, fmt.Sprintf("policy id %q is used at %s and %s", p.ID, prev.Source, p.Source))
			continue
		}
		x.base[p.ID] = p
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return idIndex{}, errors.New(strings.Join(dups, "; "))
	}
	return x, nil
}

func (x idIndex) get(id string) (*Policy, bool) {
	if p, ok := x.overlay[id]; ok {
		return p, p != nil
	}
	p, ok := x.base[id]
	return p, ok
}

// derived is x, the index of prev, changed to index policies, given which
// policies of prev were kept and where (newOf, oldOf: matchPolicies). ok
// is false when an id would be used twice (the full build then reports it).
// A policy kept as the same pointer is not looked at; a removed one leaves,
// a new one or a moved copy enters. When the overlay grows past an eighth
// of the set, the index is built anew (its cost then spread over as many
// changes).
func (x idIndex) derived(prev, policies []*Policy, newOf, oldOf []int32) (idIndex, bool) {
	y := idIndex{base: x.base, overlay: make(map[string]*Policy, len(x.overlay)+8)}
	maps.Copy(y.overlay, x.overlay)
	for i, p := range prev {
		if j := newOf[i]; j >= 0 && policies[j] == p {
			continue
		}
		if q, ok := y.get(p.ID); ok && q == p {
			y.remove(p.ID)
		}
	}
	for j, p := range policies {
		if i := oldOf[j]; i >= 0 && prev[i] == p {
			continue
		}
		if _, dup := y.get(p.ID); dup {
			return idIndex{}, false
		}
		y.overlay[p.ID] = p
	}
	if len(y.overlay) > len(y.base)/8+64 {
		flat, err := newIDIndex(policies)
		return flat, err == nil
	}
	return y, true
}

func (x idIndex) remove(id string) {
	if _, inBase := x.base[id]; inBase {
		x.overlay[id] = nil
	} else {
		delete(x.overlay, id)
	}
}

// setSeq numbers policy sets, so a set knows which one it was derived from
// without holding it (which would keep the old set's memory alive).
var setSeq atomic.Uint64

// derivation is how a set was derived from another (NewPolicySetFrom).
type derivation struct {
	from  uint64  // the other set's seq; 0: built from scratch
	oldOf []int32 // per policy, its position in the other set (-1: new)
}

// KeptFrom reports, when ps was derived from prev by a small change
// (NewPolicySetFrom), the position in prev of each of ps's policies kept
// from it: the same policy, or its copy moved to a new position (the same
// text, effect and index keys; its Source, and without @id its id, follow
// the position). -1 marks a policy new to ps. ok is false when ps was not
// derived from prev; then nothing is known of what the two share. The
// slice is ps's own: callers must not modify it.
func (ps *PolicySet) KeptFrom(prev *PolicySet) (oldOf []int32, ok bool) {
	if ps == nil || prev == nil || ps.derivation.from == 0 || ps.derivation.from != prev.seq {
		return nil, false
	}
	return ps.derivation.oldOf, true
}
