package cedarlang

import (
	"hash/maphash"

	"github.com/cedar-policy/cedar-go/types"
)

// indexKeys is a policy's extraction (extract), hashed with the seeds and
// value mask of an index. It never changes once stored: an index derived
// from another with the same seeds (NewPolicySetFrom) reuses the
// extractions of the policies the two share instead of extracting them
// again, whatever constraints extract finds.
type indexKeys struct {
	seed, prefixSeed, suffixSeed maphash.Seed
	misKeyTags                   bool
	valueMask                    uint64
	ext                          extraction
}

// extraction is p's extraction with its values hashed by ix: the one p
// keeps from an index with the same seeds, else extracted now (and kept).
func (ix *index) extraction(p *Policy) extraction {
	if p.lazy != nil {
		if k := p.lazy.keys.Load(); k != nil && ix.hashesLike(k) {
			return k.ext
		}
	}
	e := extract(p.AST, p.Effect == types.Forbid)
	for ci := range e.cons {
		ix.hashValues(&e.cons[ci])
	}
	if p.lazy != nil {
		p.lazy.keys.Store(&indexKeys{seed: ix.seed, prefixSeed: ix.prefixSeed, suffixSeed: ix.suffixSeed, misKeyTags: ix.misKeyTags, valueMask: ix.valueMask, ext: e})
	}
	return e
}

// NewPolicySetFrom is NewPolicySet for a set derived from prev (nil: none):
// its index hashes values with prev's seeds, so every policy the two sets
// share keeps the constraints prev's index extracted and hashed, and only
// the policies new to the set are extracted. A small change derives the
// index from prev's (deltaIndex: kept policies keep their keys and checks,
// new ones are filed); a large one lays it out anew from the kept
// extractions, as NewPolicySet would with those seeds.
func NewPolicySetFrom(prev *PolicySet, policies []*Policy) (*PolicySet, error) {
	if prev == nil || prev.index == nil {
		return NewPolicySet(policies)
	}
	return newPolicySet(policies, func() *index {
		if ix := deltaIndex(prev.index, prev.Policies, policies); ix != nil {
			return ix
		}
		return buildIndexSeeded(policies, prev.index)
	})
}
