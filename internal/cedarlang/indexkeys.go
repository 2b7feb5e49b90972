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
	seed, prefixSeed, suffixSeed, innerSeed maphash.Seed
	misKeyTags                              bool
	valueMask                               uint64
	ext                                     extraction
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
		p.lazy.keys.Store(&indexKeys{seed: ix.seed, prefixSeed: ix.prefixSeed, suffixSeed: ix.suffixSeed, innerSeed: ix.innerSeed, misKeyTags: ix.misKeyTags, valueMask: ix.valueMask, ext: e})
	}
	return e
}

// NewPolicySetFrom is NewPolicySet for a set derived from prev (nil: none):
// its index hashes values with prev's seeds, so every policy the two sets
// share keeps the constraints prev's index extracted and hashed, and only
// the policies new to the set are extracted. A small change (matchPolicies)
// derives the index from prev's (deltaIndex: kept policies keep their keys
// and checks, new ones are filed) and the ids from prev's (idIndex.derived),
// and the set records what it kept (KeptFrom); a large one lays the index
// out anew from the kept extractions, as NewPolicySet would with those
// seeds.
func NewPolicySetFrom(prev *PolicySet, policies []*Policy) (*PolicySet, error) {
	if prev == nil || prev.index == nil {
		return NewPolicySet(policies)
	}
	rebuilt := func() *index { return buildIndexSeeded(policies, prev.index) }
	newOf, oldOf, added, ok := matchPolicies(prev.index, prev.Policies, policies)
	if !ok {
		return newPolicySet(policies, rebuilt)
	}
	ids, ok := prev.ids.derived(prev.Policies, policies, newOf, oldOf)
	if !ok {
		return newPolicySet(policies, rebuilt) // a duplicate id, reported as a full build does
	}
	ix := deltaIndex(prev.index, policies, newOf, oldOf, added)
	if ix == nil {
		ix = rebuilt()
	}
	return &PolicySet{Policies: policies, ids: ids, index: ix, seq: setSeq.Add(1), derivation: derivation{from: prev.seq, oldOf: oldOf}}, nil
}
