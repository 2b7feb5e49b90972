package cedarlang

import (
	"maps"
	"slices"
)

// maxDelta bounds the policies a change may add and remove for the index to
// be derived from the previous one (deltaIndex) rather than built anew.
func maxDelta(n int) int { return max(64, n/20) }

// deltaIndex is the index of policies derived from old, the index of the
// set policies changed (matchPolicies: newOf maps each of its policies to
// its new position, -1 when removed; oldOf the reverse; added lists the
// positions new to policies), or nil when the slot table would be too full.
// A kept policy keeps its keys and checks, moved to its new position; a
// policy new to the set is filed as buildIndex files one, with the keys
// chooseKeys picks by old's counts. old is not changed: the two share
// nothing mutable.
//
// The result finds what the index buildIndex would build finds, never less:
// each policy is filed under keys of its own constraints and checked
// against all of them; only which of its constraints keys it may differ,
// since a built index picks the most selective by counts of the whole set.
// Buckets, verbs, prefix lengths and slot runs are never shrunk: an emptied
// one costs a lookup, never a candidate.
func deltaIndex(old *index, policies []*Policy, newOf, oldOf, added []int32) *index {
	ix := old.sameHashing()
	ix.count, ix.derived, ix.verbs = old.count, true, slices.Clone(old.verbs)
	ix.labelKeyed, ix.labelAffixes = old.labelKeyed, old.labelAffixes
	ix.buckets = make(map[bucketKey]*bucket, len(old.buckets))
	ix.consAt, ix.needsValue, ix.kinds = make([]uint32, len(policies)+1), make([]uint16, len(policies)), make([]uint8, len(policies))
	for k, b := range old.buckets {
		ix.buckets[k] = b.remapped(newOf)
	}
	keyed := map[uint64][]int32{}
	verbSeen := make(map[uint64]bool, len(ix.verbs))
	for _, v := range ix.verbs {
		verbSeen[v] = true
	}
	touched := map[*bucket]bool{}
	ix.cons = make([]uint32, 0, len(old.cons)+len(old.cons)/max(len(oldOf), 1)*len(added)+64)
	for j := 0; j < len(policies); {
		i := oldOf[j]
		if i < 0 {
			e := ix.extraction(policies[j])
			ix.noteLabels(&e)
			ix.fileTracked(keyed, verbSeen, policies[j], &e, int32(j), touched)
			ix.appendChecks(e.cons)
			ix.consAt[j+1] = uint32(len(ix.cons))
			j++
			continue
		}
		// A run of kept policies in their old order: one copy of their
		// checks, their offsets moved by one difference.
		run := 1
		for j+run < len(policies) && oldOf[j+run] == i+int32(run) {
			run++
		}
		copy(ix.needsValue[j:j+run], old.needsValue[i:i+int32(run)])
		copy(ix.kinds[j:j+run], old.kinds[i:i+int32(run)])
		shift := uint32(len(ix.cons)) - old.consAt[i]
		ix.cons = append(ix.cons, old.cons[old.consAt[i]:old.consAt[i+int32(run)]]...)
		for r := 1; r <= run; r++ {
			ix.consAt[j+r] = old.consAt[int(i)+r] + shift
		}
		j += run
	}
	for b := range touched {
		b.sortLists()
		b.updateFilter()
	}
	if !ix.refill(old, newOf, keyed) {
		return nil
	}
	return ix
}

// keptAs reports whether q, a policy of the set old indexes, is kept as p
// in the set derived from it: the same text (one parse, or a copy of it
// moved to a new position), effect and extracted keys, hashed as old hashes.
func (old *index) keptAs(q, p *Policy) bool {
	k := q.lazy.keys.Load()
	return k != nil && k == p.lazy.keys.Load() && old.hashesLike(k) && lazyPolicy(q) == lazyPolicy(p) && q.Effect == p.Effect
}

// matchPolicies pairs the policies of prev (indexed by old) with those of
// policies: newOf[i] is the new position of prev[i] (-1: removed), oldOf
// the reverse (-1: new), added the positions of policies to file anew, in
// order. Kept policies keep their order, so remapped postings stay sorted.
// The policies both sets begin and end with are paired by a scan, and only
// those between are matched through a map: a change in one place costs
// pointer comparisons of the rest, not hashing. ok is false when the change
// is too large to derive the index from old, or a policy of prev was not
// extracted with old's seeds.
func matchPolicies(old *index, prev, policies []*Policy) (newOf, oldOf, added []int32, ok bool) {
	if old.count == nil {
		return nil, nil, nil, false
	}
	newOf, oldOf = filled(len(prev), -1), filled(len(policies), -1)
	lo := 0
	for lo < len(prev) && lo < len(policies) && old.keptAs(prev[lo], policies[lo]) {
		newOf[lo], oldOf[lo] = int32(lo), int32(lo)
		lo++
	}
	hiPrev, hiNew := len(prev), len(policies)
	for hiPrev > lo && hiNew > lo && old.keptAs(prev[hiPrev-1], policies[hiNew-1]) {
		hiPrev, hiNew = hiPrev-1, hiNew-1
		newOf[hiPrev], oldOf[hiNew] = int32(hiNew), int32(hiPrev)
	}
	at := make(map[*indexKeys]int32, hiPrev-lo)
	for i := lo; i < hiPrev; i++ {
		k := prev[i].lazy.keys.Load()
		if k == nil || !old.hashesLike(k) {
			return nil, nil, nil, false
		}
		at[k] = int32(i)
	}
	last, limit := int32(lo-1), maxDelta(len(policies))
	for j := lo; j < hiNew; j++ {
		i, found := at[policies[j].lazy.keys.Load()]
		if found && i > last && newOf[i] < 0 && old.keptAs(prev[i], policies[j]) {
			newOf[i], oldOf[j], last = int32(j), i, i
			continue
		}
		if added = append(added, int32(j)); len(added) > limit {
			return nil, nil, nil, false
		}
	}
	if removed := len(prev) - (len(policies) - len(added)); removed > limit {
		return nil, nil, nil, false
	}
	return newOf, oldOf, added, true
}

func filled(n int, v int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// noteLabels sets labelKeyed when e keys on (or checks) a namespace label,
// and labelAffixes when on a `like` pattern of a label's value.
func (ix *index) noteLabels(e *extraction) {
	for _, c := range e.cons {
		for _, p := range c.keyParts() {
			if p.dim == dLabel {
				ix.labelKeyed = true
				ix.labelAffixes = ix.labelAffixes || p.prefix
			}
		}
	}
}

// fileTracked is filePolicy, noting the buckets whose lists it appended to.
func (ix *index) fileTracked(keyed map[uint64][]int32, verbSeen map[uint64]bool, p *Policy, e *extraction, j int32, touched map[*bucket]bool) {
	ix.filePolicy(keyed, verbSeen, p, e, j, ix.count)
	vids, tids := ix.ids(e.values(dVerb)), ix.ids(e.values(dRType))
	part := partitionOf(p)
	for _, v := range vids {
		for _, t := range tids {
			touched[ix.buckets[bucketKey{v, t, part}]] = true
		}
	}
}

// remapped is a copy of b with every policy moved to its new position
// (newOf), removed ones left out.
func (b *bucket) remapped(newOf []int32) *bucket {
	c := *b
	c.rest, c.keyed = remapList(b.rest, newOf), remapList(b.keyed, newOf)
	// Shared with b: an append makes a new array, and updateFilter copies
	// the filter before it sets a bit.
	c.affixKeys = slices.Clip(b.affixKeys)
	for d := range b.absent {
		c.absent[d] = remapList(b.absent[d], newOf)
		c.openRest[d] = remapList(b.openRest[d], newOf)
		c.openWide[d] = remapList(b.openWide[d], newOf)
		c.prefixLens[d] = slices.Clone(b.prefixLens[d])
		c.suffixLens[d] = slices.Clone(b.suffixLens[d])
		c.innerLens[d] = slices.Clone(b.innerLens[d])
	}
	return &c
}

// remapList is l with each position moved (newOf), removed ones left out:
// a new slice, sorted when l is (kept policies keep their order).
func remapList(l []int32, newOf []int32) []int32 {
	if len(l) == 0 {
		return nil
	}
	out := make([]int32, 0, len(l))
	for _, i := range l {
		if j := newOf[i]; j >= 0 {
			out = append(out, j)
		}
	}
	return out
}

// sortLists sorts b's lists after policies were appended out of order.
func (b *bucket) sortLists() {
	slices.Sort(b.rest)
	slices.Sort(b.keyed)
	for d := range b.absent {
		slices.Sort(b.absent[d])
		slices.Sort(b.openRest[d])
		slices.Sort(b.openWide[d])
	}
}

// refill lays out ix's slot table: old's slots, their postings moved
// (newOf), and the keys of keyed added, each into the slot of the first
// key of its probe run with its fingerprint (their postings then shared:
// more candidates, never fewer), else into the run's empty end. false when
// the table would be more than half full (then it is built anew).
func (ix *index) refill(old *index, newOf []int32, keyed map[uint64][]int32) bool {
	used := 0
	for _, s := range old.slots {
		if s != 0 {
			used++
		}
	}
	if len(keyed) > 0 && 2*(used+len(keyed)) > len(old.slots) {
		return false
	}
	ix.slots = slices.Clone(old.slots)
	extra := map[uint64][]int32{} // by slot
	var extraAt []uint64          // extra's slots, in order
	if len(ix.slots) > 0 {
		mask := uint64(len(ix.slots) - 1)
		for _, k := range slices.Sorted(maps.Keys(keyed)) {
			fp := ix.keyPrint(k)
			i := k & mask
			for ix.slots[i] != 0 && ix.slots[i]>>32 != fp {
				i = (i + 1) & mask
			}
			if ix.slots[i] == 0 {
				ix.slots[i] = fp << 32
			}
			if _, seen := extra[i]; !seen {
				extraAt = append(extraAt, i)
			}
			extra[i] = append(extra[i], keyed[k]...)
		}
	}
	slices.Sort(extraAt)
	ix.postings = make([]int32, 0, len(old.postings)+2*len(keyed)+1)
	empty := -1
	var buf []int32
	for i, s := range ix.slots {
		if s == 0 {
			continue
		}
		l := old.remappedPostings(old.slots[i], newOf, buf[:0])
		if len(extraAt) > 0 && extraAt[0] == uint64(i) {
			l = slices.Compact(slices.Sorted(slices.Values(append(l, extra[uint64(i)]...))))
			extraAt = extraAt[1:]
		}
		ref := uint64(0)
		switch {
		case len(l) == 1:
			ref = uint64(refInline | uint32(l[0]))
		case len(l) == 0:
			if empty < 0 {
				empty = len(ix.postings)
				ix.postings = append(ix.postings, 0)
			}
			ref = uint64(empty)
		default:
			ref = uint64(len(ix.postings))
			ix.postings = append(ix.postings, int32(len(l)))
			ix.postings = append(ix.postings, l...)
		}
		ix.slots[i] = s>>32<<32 | ref
		buf = l
	}
	return true
}

// remappedPostings appends to buf the policies slot s (of ix; 0: none)
// refers to, moved to their new positions (newOf), removed ones left out.
func (ix *index) remappedPostings(s uint64, newOf []int32, buf []int32) []int32 {
	if s == 0 {
		return buf
	}
	if ref := uint32(s); ref&refInline != 0 {
		if j := newOf[ref&^refInline]; j >= 0 {
			buf = append(buf, j)
		}
		return buf
	}
	ref := uint32(s)
	for _, i := range ix.postings[ref+1 : ref+1+uint32(ix.postings[ref])] {
		if j := newOf[i]; j >= 0 {
			buf = append(buf, j)
		}
	}
	return buf
}
