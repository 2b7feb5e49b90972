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
	seed, prefixSeed maphash.Seed
	valueMask        uint64
	ext              extraction
}

// extraction is p's extraction with its values hashed by ix: the one p
// keeps from an index with the same seeds, else extracted now (and kept).
func (ix *index) extraction(p *Policy) extraction {
	if p.lazy != nil {
		if k := p.lazy.keys.Load(); k != nil && k.seed == ix.seed && k.prefixSeed == ix.prefixSeed && k.valueMask == ix.valueMask {
			return k.ext
		}
	}
	e := extract(p.AST, p.Effect == types.Forbid)
	for ci := range e.cons {
		ix.hashValues(&e.cons[ci])
	}
	if p.lazy != nil {
		p.lazy.keys.Store(&indexKeys{seed: ix.seed, prefixSeed: ix.prefixSeed, valueMask: ix.valueMask, ext: e})
	}
	return e
}

// NewPolicySetFrom is NewPolicySet for a set derived from prev (nil: none):
// its index hashes values with prev's seeds, so every policy the two sets
// share keeps the constraints prev's index extracted and hashed, and only
// the policies new to the set are extracted. The index it builds is the one
// NewPolicySet would build with those seeds: which keys a policy is filed
// under depends on every policy of the set (the most selective), so it is
// laid out anew, from the kept extractions.
func NewPolicySetFrom(prev *PolicySet, policies []*Policy) (*PolicySet, error) {
	if prev == nil || prev.index == nil {
		return NewPolicySet(policies)
	}
	return newPolicySet(policies, func() *index { return buildIndexSeeded(policies, prev.index) })
}
