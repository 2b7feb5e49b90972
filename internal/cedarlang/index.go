package cedarlang

import (
	"hash/maphash"
	"maps"
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/parallel"
)

// The index narrows a request to the policies that can match it, so the cost
// of a decision grows with the policies that concern the request, not with
// the size of the set. It follows the indexes of boolean expressions
// (Whang et al., "Indexing Boolean Expressions", VLDB 2009; Sadoghi and
// Jacobsen, BE-Tree, SIGMOD 2011): a policy is a conjunction of predicates
// over attribute paths, it is filed under one of them (its access
// predicate), and every other predicate is a post-filter checked after the
// lookup. The rules (docs/performance.md, "The policy index: what it keys on"):
//
//   - Conjuncts: the scope, then every `when` clause split at `&&`, then
//     every `unless` clause negated (`!(a || b)` is `!a && !b`, `!!a` is
//     `a`, `!(a != b)` is `a == b`).
//   - Paths (index_paths.go): every attribute whose value is known when a
//     request is authorized is a dimension: the verb (action, context.verb),
//     the resource type, the principal's type, username, uid, groups,
//     namespace and name, its tags (the user's extra), and the resource's
//     namespace, name, apiGroup, resource, subresource and path, and the
//     labels of its namespace. An object's fields are not known (they are
//     left to partial evaluation), and no known attribute is a Long, so no
//     comparison is keyed.
//   - Predicates: on any scalar path, `==` a literal, a literal set's
//     `.contains`, and `like` (a pattern without a wildcard is an equality;
//     else its literal prefix, its literal suffix, or without either a gram
//     of its longest literal: keys only, a request looks up its value cut
//     to each prefix or suffix length the bucket holds, or every window of
//     each gram length); on a set-valued path (groups, tags, labels)
//     `.contains`, `.containsAny` either way round and `.containsAll`;
//     entity `==`, `in` and `is` in the scope and in conditions. A
//     disjunction on one path is the union of its values; a permit's
//     disjunction across paths ("in team-7, or a team-7 admin"; a side may
//     be a conjunction) is keyed under each alternative. A permit's relation
//     between two attributes (`principal.namespace == resource.namespace`)
//     carries a literal on one of them to the other. `!=`, `has`, negations
//     and anything else are post-filters (evaluation checks them).
//   - A policy lands in one bucket per (verb, resource type) it allows, and in
//     each bucket under one key: its access predicate, the value set of its
//     most selective predicate (fewest policies share it; a principal type
//     only when nothing else is as selective), or "rest" without one.
//   - Enforced permits, forbids and audit-mode permits are filed apart
//     (three partitions of buckets, partition). Lookup (cursor.go) reads
//     the forbids and audit permits in full and the permits one at a time,
//     merging their sorted postings in place, so a decision that stops at
//     the first satisfied permit reads no more of a key's postings than it
//     needs; a folded lookup reads neither permits nor audit permits that
//     only an open value finds.
//   - Candidates looks up, in each bucket the request reads, its value on
//     each path the bucket keys (the bucket knows which), then checks every
//     found policy against all its predicates. An open request value
//     (namespace or name "", apiGroup or resource "*", a "*" verb) satisfies
//     every predicate on it and finds every policy keyed on that path (but a
//     permit constraining a resource value can then leave only a residual:
//     where no admission follows, a decision skips it,
//     CandidateQuery.SkipResidualOnly). An absent attribute (a
//     cluster-scoped resource's namespace, a User's namespace, a user
//     without a uid) satisfies none.
//   - Values are known to the index only by their hashes: the keys are
//     64-bit hashes of (bucket, dimension, value) in one open-addressing
//     table, and the constraints checked after the lookup hold 32-bit value
//     hashes. Equal values have equal hashes, so a collision can only add a
//     candidate (which evaluation then rejects), never lose one. A lookup is
//     one table probe: no string comparison, and no per-bucket map, so its
//     cost stays one cache miss however large the set grows.
//   - Errors: for a permit an evaluation error is the same as not matching,
//     so any conjunct may be used (a permit that would fail on an absent
//     attribute, which the validator rejects anyway, may then go unreported).
//     A forbid that fails denies (fail closed), so a forbid relies only on
//     conjuncts up to the first one that may fail for another reason than
//     an absent attribute; a constraint after (or on) a conjunct that fails
//     when attribute A is absent rules the forbid out only when the request
//     certainly has A (not absent, and not open on an optional attribute).
type index struct {
	seed maphash.Seed
	// prefixSeed hashes the literal prefixes of `like` patterns: a prefix
	// key never stands for an equal value.
	prefixSeed maphash.Seed
	suffixSeed maphash.Seed // the same for `like` suffixes
	innerSeed  maphash.Seed // the same for grams of `like` inner literals
	// valueMask and printMask keep bits of value hashes and fingerprints:
	// all of them, but for tests that make collisions common.
	valueMask, printMask uint64
	buckets              map[bucketKey]*bucket
	verbs                []uint64 // every verb hash with a bucket, for an unexpanded "*" verb
	// slots is the keyed lookup: an open-addressing table (linear probing,
	// at most half full) of keyOf(bucket, tag, dimension, value hash). A
	// key's home is its low bits; its slot holds the key's high 32 bits as a
	// fingerprint (never zero: zero is an empty slot) and a reference to its
	// postings: one policy inline (refInline set), or an offset in postings
	// where a count precedes the policies. A lookup takes every slot of the
	// run from the home to the next empty slot whose fingerprint matches,
	// so keys sharing a fingerprint share their postings (more candidates,
	// never fewer).
	slots    []uint64
	postings []int32
	// cons holds each policy's constraints, encoded from consAt[i]:
	// header (dim | needs<<4 | n<<16), then n 32-bit value hashes.
	cons   []uint32
	consAt []uint32
	// needsValue[i]: the resource dimensions policy i constrains outside a
	// disjunction. A permit that constrains a value the request leaves open
	// can leave only a residual, never allow outright
	// (CandidateQuery.SkipResidualOnly).
	needsValue []uint16
	// kinds[i]: policy i's kindLazy (an enforced permit) and kindForbid
	// bits, read without the policy itself (a lookup checks many).
	kinds []uint8
	// labelKeyed: some policy is keyed on (or checked against) a label of
	// the request's namespace.
	labelKeyed bool
	// labelAffixes: some policy is keyed on a `like` pattern of a label's
	// value (a request then lists its labels' values as strings).
	labelAffixes bool
	// misKeyTags: a deliberately wrong index for tests (MisKeyedForTest).
	misKeyTags bool
	// count: the policies sharing each (dimension, value) when the index
	// was built (chooseKeys); an index derived by a change shares it.
	count map[dimKey]int32
	// derived: made from another index by a change (deltaIndex).
	derived bool
}

const refInline = 1 << 31

func (ix *index) keyPrint(k uint64) uint64 { return max(k>>32&ix.printMask, 1) }

// anyID is the bucket key part of an unconstrained verb or resource type. A
// value hashing to it lands in the unconstrained bucket, which every request
// reads: more candidates, never fewer.
const anyID = ^uint64(0)

// bucketKey names a bucket: a verb, a resource type, and the partition.
type bucketKey struct {
	verb, rtype uint64
	part        partition
}

// partition is a part of the index's buckets. Enforced permits (lazy) are
// kept apart from forbids and audit-mode permits, which a decision
// evaluates in full, so a request can read the permits one at a time
// (Lookup) and stop at the first satisfied one. Audit-mode permits are kept
// apart from forbids, so that a folded lookup can leave out, as it does for
// enforced permits, those only an open value finds (CandidateQuery.
// SkipResidualOnly): they can only leave a residual, of which no finding
// comes, and there are as many of them as policies keyed on that value.
type partition uint8

const (
	partForbids      partition = iota // forbids, enforced and audit-mode
	partPermits                       // enforced permits: lazyPolicy
	partAuditPermits                  // audit-mode permits
	nPartitions
)

// partitions is a set of partitions, by bit.
type partitions uint8

const (
	eagerPartitions partitions = 1<<partForbids | 1<<partAuditPermits
	lazyPartitions  partitions = 1 << partPermits
	allPartitions   partitions = eagerPartitions | lazyPartitions
)

// partitionOf is p's partition.
func partitionOf(p *Policy) partition {
	switch {
	case p.Effect == types.Forbid:
		return partForbids
	case p.IsAudit():
		return partAuditPermits
	}
	return partPermits
}

// lazyPolicy reports whether p is in the lazy partition: an enforced permit.
func lazyPolicy(p *Policy) bool { return partitionOf(p) == partPermits }

// Bits of index.kinds.
const (
	kindLazy   uint8 = 1 << iota // lazyPolicy
	kindForbid                   // a forbid
)

// kindOf is p's kinds bits.
func kindOf(p *Policy) uint8 {
	var k uint8
	if lazyPolicy(p) {
		k |= kindLazy
	}
	if p.Effect == types.Forbid {
		k |= kindForbid
	}
	return k
}

type dimKey struct {
	dim uint8
	val uint64
}

type bucket struct {
	id   uint32
	dims uint16 // dimensions with keyed policies
	// exact: the dimensions with keys of equal values (not only `like`
	// prefixes, suffixes or grams), under any tag: only on those does a
	// request look its own value up.
	exact uint16
	// Policies are keyed (in the index's slots) under (tag<<4 | dim, value).
	// Tag 0 is a policy's primary key. A policy whose primary key is on a
	// dimension r that requests may leave open is also keyed under tag r+1
	// by its secondary key (chooseKeys), for requests that leave r open;
	// openDims[r] lists those keys' dimensions, openRest[r] the policies
	// without a secondary key.
	openDims [nDims]uint16
	openRest [nDims][]int32
	// openWide[r] lists the policies keyed under tag r+1 on a dimension a
	// request may leave open too (openWideDims[r]): a request that leaves
	// r and one of those open reads them all.
	openWideDims [nDims]uint16
	openWide     [nDims][]int32
	// absent[d] lists the forbids keyed on a constraint that needs d, for
	// requests where d is absent or may be.
	absentDims uint16
	absent     [nDims][]int32
	// prefixLens[d]: the lengths of the `like` prefixes keyed on d (under
	// any tag), ascending: a request looks up each prefix of its value of
	// these lengths.
	prefixLens [nDims][]uint16
	// suffixLens[d]: the same for `like` suffixes (a pattern's literal
	// text after its last wildcard).
	suffixLens [nDims][]uint16
	// innerLens[d]: the lengths of the grams of `like` inner literals keyed
	// on d: a request looks up every window of its value of these lengths.
	innerLens [nDims][]uint16
	// affixKeys: the slot keys of the `like` keys filed in the bucket;
	// filter: a bit array of them (index_filter.go), which holds the first
	// filtered of them.
	affixKeys []uint64
	filter    []uint64
	filtered  int
	rest      []int32
	keyed     []int32 // every policy keyed in the bucket, in order
}

// constraint is one extracted fact: the dimension takes one of vals.
type constraint struct {
	dim uint8
	// needs: the dimensions that must be present (not absent, not possibly
	// absent) for this constraint to rule a forbid out: earlier conjuncts
	// (and this one) fail when their attribute is absent, and a failing
	// forbid denies.
	needs uint16
	vals  []string
	// prefix: the value starts with one of vals (a `like` pattern's literal
	// prefix), rather than equals one. With suffix also set, the value ends
	// with one of vals instead; with inner, it holds one of them somewhere.
	prefix, suffix, inner bool
	// hashes of vals, filled by buildIndex.
	hashes []uint64
	// alts: for dAlt, the alternatives (one per dimension).
	alts []constraint
	// opts: for an alternative of a disjunction whose side holds several
	// constraints (`principal.name like "pool-*-t7"`: a prefix and a
	// suffix), each of them, one of which keys it: the cheapest by the
	// set's counts (resolveAlts). The alternative itself is the first.
	opts []constraint
}

// bucketing reports whether c picks a policy's buckets (an equal verb or a
// resource type) rather than a key in them.
func (c constraint) bucketing() bool { return (c.dim == dVerb || c.dim == dRType) && !c.prefix }

// sameKind reports whether c and o key their values alike: equal values,
// `like` prefixes, suffixes or inner grams.
func (c constraint) sameKind(o constraint) bool {
	return c.prefix == o.prefix && c.suffix == o.suffix && c.inner == o.inner
}

// keyParts is every constraint c may be keyed under: its alternatives'
// options, or its alternatives, or c itself.
func (c constraint) keyParts() []constraint {
	var out []constraint
	for _, p := range c.parts() {
		if len(p.opts) > 0 {
			out = append(out, p.opts...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// resolveAlts is cons with each alternative of a disjunction that has
// options keyed by the cheapest of them (fewest policies share its values;
// a principal type only when nothing else is as cheap): cons itself when
// none has options.
func resolveAlts(cons []constraint, count map[dimKey]int32) []constraint {
	var out []constraint
	for i, c := range cons {
		if c.dim != dAlt || !slices.ContainsFunc(c.alts, func(a constraint) bool { return len(a.opts) > 0 }) {
			continue
		}
		if out == nil {
			out = slices.Clone(cons)
		}
		alts := slices.Clone(c.alts)
		for j, a := range alts {
			var best keyCost
			for k, o := range a.opts {
				if cost := o.cost(count); k == 0 || cost.less(best) {
					alts[j], best = o, cost
				}
			}
		}
		out[i].alts = alts
	}
	if out == nil {
		return cons
	}
	return out
}

// cost is what keying on c costs: how many policies share its values.
func (c constraint) cost(count map[dimKey]int32) keyCost {
	cost := keyCost{weak: c.dim == dPType}
	for _, part := range c.parts() {
		for _, h := range part.hashes {
			cost.n += int64(count[dimKey{part.dim, h}])
		}
	}
	return cost
}

// parts is c's alternatives, or c itself.
func (c constraint) parts() []constraint {
	if c.dim == dAlt {
		return c.alts
	}
	return []constraint{c}
}

// dimMask is the dimensions c keys on.
func (c constraint) dimMask() uint16 {
	var m uint16
	for _, p := range c.parts() {
		m |= 1 << p.dim
	}
	return m
}

// extraction is what the index knows about one policy.
type extraction struct {
	cons []constraint
}

func (ix *index) hash(s string) uint64 { return maphash.String(ix.seed, s) & ix.valueMask }

func (ix *index) prefixHash(s string) uint64 {
	return maphash.String(ix.prefixSeed, s) & ix.valueMask
}

func (ix *index) suffixHash(s string) uint64 {
	return maphash.String(ix.suffixSeed, s) & ix.valueMask
}

func (ix *index) innerHash(s string) uint64 {
	return maphash.String(ix.innerSeed, s) & ix.valueMask
}

// keyOf is the slot key of (bucket, tag<<4 | dim, value hash): a bijective
// mix (murmur3's finalizer) of the value hash and the rest, never zero.
func keyOf(bucket uint32, tagDim uint16, val uint64) uint64 {
	k := val ^ (uint64(bucket)<<16|uint64(tagDim))*0x9e3779b97f4a7c15
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	if k == 0 {
		k = 1
	}
	return k
}

func buildIndex(policies []*Policy) *index {
	return buildIndexMasked(policies, ^uint64(0), ^uint64(0))
}

// buildIndexMasked builds the index keeping only the bits of valueMask of
// every value hash and of printMask of every fingerprint.
func buildIndexMasked(policies []*Policy, valueMask, printMask uint64) *index {
	return newIndex(valueMask, printMask).build(policies)
}

func newIndex(valueMask, printMask uint64) *index {
	return &index{seed: maphash.MakeSeed(), prefixSeed: maphash.MakeSeed(), suffixSeed: maphash.MakeSeed(), innerSeed: maphash.MakeSeed(), valueMask: valueMask, printMask: printMask}
}

// buildIndexSeeded builds the index with the seeds and masks of like.
func buildIndexSeeded(policies []*Policy, like *index) *index {
	return like.sameHashing().build(policies)
}

// sameHashing is an empty index that hashes values as ix does.
func (ix *index) sameHashing() *index {
	return &index{seed: ix.seed, prefixSeed: ix.prefixSeed, suffixSeed: ix.suffixSeed, innerSeed: ix.innerSeed, misKeyTags: ix.misKeyTags, valueMask: ix.valueMask, printMask: ix.printMask}
}

// hashesLike reports whether k was hashed as ix hashes values.
func (ix *index) hashesLike(k *indexKeys) bool {
	return k.seed == ix.seed && k.prefixSeed == ix.prefixSeed && k.suffixSeed == ix.suffixSeed && k.innerSeed == ix.innerSeed && k.misKeyTags == ix.misKeyTags && k.valueMask == ix.valueMask
}

// build files policies in the empty index ix.
func (ix *index) build(policies []*Policy) *index {
	ix.buckets = map[bucketKey]*bucket{}
	ix.consAt, ix.needsValue, ix.kinds = make([]uint32, len(policies)+1), make([]uint16, len(policies)), make([]uint8, len(policies))
	exts, count := ix.extractAll(policies)
	// keyed collects the postings by slot key: values whose keys collide
	// share their postings (more candidates, never fewer).
	keyed := map[uint64][]int32{}
	verbSeen := map[uint64]bool{}
	for i := range policies {
		ix.filePolicy(keyed, verbSeen, policies[i], &exts[i], int32(i), count)
		ix.appendChecks(exts[i].cons)
		ix.consAt[i+1] = uint32(len(ix.cons))
	}
	ix.cons = slices.Clip(ix.cons)
	ix.count = count
	for _, b := range ix.buckets {
		b.updateFilter()
	}
	ix.fill(keyed)
	return ix
}

// filePolicy files policy p (at i, extraction e) in the buckets of its
// verbs and resource types, under the keys chooseKeys picks by count, and
// notes the resource dimensions it needs.
func (ix *index) filePolicy(keyed map[uint64][]int32, verbSeen map[uint64]bool, p *Policy, e *extraction, i int32, count map[dimKey]int32) {
	vids := ix.ids(e.values(dVerb))
	tids := ix.ids(e.values(dRType))
	keys := resolveAlts(e.cons, count)
	primary, secondary := chooseKeys(keys, count)
	for _, c := range e.cons {
		if c.dim != dAlt && isResourceDim(c.dim) {
			ix.needsValue[i] |= 1 << c.dim
		}
	}
	part := partitionOf(p)
	ix.kinds[i] = kindOf(p)
	for _, v := range vids {
		if v != anyID && !verbSeen[v] {
			verbSeen[v] = true
			ix.verbs = append(ix.verbs, v)
		}
		for _, t := range tids {
			ix.bucketOf(bucketKey{v, t, part}).addPolicy(keyed, keys, i, primary, secondary)
		}
	}
}

// extractAll extracts every policy's constraints, fills their hashes, and
// counts the policies sharing each (dimension, value) but those that pick
// buckets.
func (ix *index) extractAll(policies []*Policy) ([]extraction, map[dimKey]int32) {
	exts := make([]extraction, len(policies))
	// Extraction walks every policy: in parallel (ix only hashes).
	parallel.For(len(policies), func(i int) { exts[i] = ix.extraction(policies[i]) })
	count := map[dimKey]int32{}
	for i := range policies {
		ix.noteLabels(&exts[i])
		for ci := range exts[i].cons {
			c := &exts[i].cons[ci]
			if c.bucketing() {
				continue
			}
			for _, part := range c.keyParts() {
				for _, h := range part.hashes {
					count[dimKey{part.dim, h}]++
				}
			}
		}
	}
	return exts, count
}

// chooseKeys picks a policy's keys among cons, by index (-1: none): the
// primary (its access predicate) is the cheapest constraint that does not
// pick buckets (dimensions a request may leave open counting double, since
// open requests read more; the principal's type only when nothing else is
// as cheap). When the primary is on a dimension a request may leave open,
// the secondary keys the policy for requests that leave it open: the
// cheapest constraint that holds whenever it is read, on none of the
// primary's openable dimensions (open ones again counting double: a
// request that leaves both open reads every policy so keyed, openWide). A
// constraint's cost is how many policies share its values.
func chooseKeys(cons []constraint, count map[dimKey]int32) (primary, secondary int) {
	primary, secondary = -1, -1
	var best, bestS keyCost
	for ci, c := range cons {
		if c.bucketing() {
			continue
		}
		if cost := c.openCost(count); primary < 0 || cost.less(best) {
			primary, best = ci, cost
		}
	}
	if primary < 0 || cons[primary].dimMask()&openableDims == 0 {
		return primary, -1
	}
	primaryOpen := cons[primary].dimMask() & openableDims
	for ci, c := range cons {
		if c.bucketing() || c.needs != 0 || c.dimMask()&primaryOpen != 0 {
			continue
		}
		if cost := c.openCost(count); secondary < 0 || cost.less(bestS) {
			secondary, bestS = ci, cost
		}
	}
	return primary, secondary
}

// openCost is c's cost as a key: the policies sharing its values, doubled
// when it is on a dimension a request may leave open.
func (c constraint) openCost(count map[dimKey]int32) keyCost {
	cost := c.cost(count)
	if c.dimMask()&openableDims != 0 {
		cost.n *= 2 // open requests read more
	}
	return cost
}

// keyCost is what a key costs: the policies sharing it, and whether it is
// weak (the principal's type: three values at most), which loses a tie.
type keyCost struct {
	n    int64
	weak bool
}

func (k keyCost) less(o keyCost) bool { return k.n < o.n || k.n == o.n && !k.weak && o.weak }

// bucketOf returns the bucket of k, creating it.
func (ix *index) bucketOf(k bucketKey) *bucket {
	b := ix.buckets[k]
	if b == nil {
		b = &bucket{id: uint32(len(ix.buckets))}
		ix.buckets[k] = b
	}
	return b
}

// addPolicy files policy i, with constraints cons and keys chosen by chooseKeys,
// in b: under "rest" without a primary key, else under its primary key (and
// in absent for the dimensions that key needs), and, when the primary key is
// on a dimension a request may leave open, under its secondary key for
// requests that leave it open.
func (b *bucket) addPolicy(keyed map[uint64][]int32, cons []constraint, i int32, primary, secondary int) {
	if primary < 0 {
		b.rest = append(b.rest, i)
		return
	}
	c := cons[primary]
	b.dims |= c.dimMask()
	b.keyed = append(b.keyed, i)
	put(keyed, b, 0, c, i)
	for d := range nDims {
		if c.needs&(1<<d) != 0 {
			b.absentDims |= 1 << d
			b.absent[d] = append(b.absent[d], i)
		}
	}
	for d := range nDims {
		if c.dimMask()&(1<<d) == 0 || !isOpenableDim(d) {
			continue
		}
		if secondary < 0 {
			b.openRest[d] = append(b.openRest[d], i)
			continue
		}
		sc := cons[secondary]
		b.openDims[d] |= sc.dimMask()
		put(keyed, b, uint16(d)+1, sc, i)
		if wide := sc.dimMask() & openableDims; wide != 0 {
			b.openWideDims[d] |= wide
			b.openWide[d] = append(b.openWide[d], i)
		}
	}
}

// Kinds of a check after the lookup: a value among a set, or a `like`
// prefix, suffix or inner gram (each with its length).
const (
	checkEqual uint32 = iota
	checkPrefix
	checkSuffix
	checkInner
)

// checkKind is how c is checked after the lookup.
func (c constraint) checkKind() uint32 {
	switch {
	case c.inner:
		return checkInner
	case c.suffix:
		return checkSuffix
	case c.prefix:
		return checkPrefix
	}
	return checkEqual
}

// appendChecks encodes cons (but those that pick buckets and dAlt) into
// ix.cons, to be checked after the lookup: a header (dim | kind<<8 |
// n<<11), the dimensions it needs, then n 32-bit value hashes, each after
// its length for a `like` key.
func (ix *index) appendChecks(cons []constraint) {
	for _, c := range cons {
		if c.bucketing() || c.dim == dAlt {
			continue
		}
		kind := c.checkKind()
		ix.cons = append(ix.cons, uint32(c.dim)|kind<<8|uint32(len(c.vals))<<11, uint32(c.needs))
		for j, h := range c.hashes {
			if kind != checkEqual {
				ix.cons = append(ix.cons, uint32(len(c.vals[j])))
			}
			ix.cons = append(ix.cons, uint32(h))
		}
	}
}

// fill lays the keyed postings out in the slot table.
func (ix *index) fill(keyed map[uint64][]int32) {
	if len(keyed) == 0 {
		return
	}
	size := 2
	for size < 2*len(keyed) {
		size *= 2
	}
	ix.slots = make([]uint64, size)
	mask := uint64(size - 1)
	n := 0
	for _, l := range keyed {
		if len(l) > 1 {
			n += 1 + len(l)
		}
	}
	ix.postings = make([]int32, 0, n)
	for _, k := range slices.Sorted(maps.Keys(keyed)) {
		l := keyed[k]
		ref := uint64(refInline | uint32(l[0]))
		if len(l) > 1 {
			ref = uint64(len(ix.postings))
			ix.postings = append(ix.postings, int32(len(l)))
			ix.postings = append(ix.postings, l...)
		}
		i := k & mask
		for ix.slots[i] != 0 {
			i = (i + 1) & mask
		}
		ix.slots[i] = ix.keyPrint(k)<<32 | ref
	}
}

// alternative's, for dAlt).
func put(keyed map[uint64][]int32, b *bucket, tag uint16, c constraint, i int32) {
	for _, part := range c.parts() {
		if part.prefix {
			for _, v := range part.vals {
				b.addAffixLen(part, len(v))
			}
		} else {
			b.exact |= 1 << part.dim
		}
		for _, h := range slices.Compact(slices.Sorted(slices.Values(part.hashes))) {
			k := keyOf(b.id, tag<<4|uint16(part.dim), h)
			if part.prefix {
				b.noteAffixKey(k)
			}
			keyed[k] = append(keyed[k], i)
		}
	}
}

// addAffixLen records that a `like` prefix (or suffix, or inner gram: c's
// kind) of n bytes is keyed on c's dimension.
func (b *bucket) addAffixLen(c constraint, n int) {
	lens := &b.prefixLens[c.dim]
	switch {
	case c.inner:
		lens = &b.innerLens[c.dim]
	case c.suffix:
		lens = &b.suffixLens[c.dim]
	}
	l := uint16(min(n, 1<<16-1))
	if i, found := slices.BinarySearch(*lens, l); !found {
		*lens = slices.Insert(*lens, i, l)
	}
}

// hashValues fills c's hashes (its alternatives', for dAlt).
func (ix *index) hashValues(c *constraint) {
	for j := range c.alts {
		ix.hashValues(&c.alts[j])
	}
	for j := range c.opts {
		ix.hashValues(&c.opts[j])
	}
	c.hashes = make([]uint64, len(c.vals))
	for j, v := range c.vals {
		if ix.misKeyTags && (c.dim == dExtra || c.dim == dLabel) {
			v += "!"
		}
		switch {
		case c.inner:
			c.hashes[j] = ix.innerHash(v)
		case c.suffix:
			c.hashes[j] = ix.suffixHash(v)
		case c.prefix:
			c.hashes[j] = ix.prefixHash(v)
		default:
			c.hashes[j] = ix.hash(v)
		}
	}
}

// ids is a verb or type constraint's value hashes, or anyID when
// unconstrained.
func (ix *index) ids(hashes []uint64, constrained bool) []uint64 {
	if !constrained {
		return []uint64{anyID}
	}
	return slices.Compact(slices.Sorted(slices.Values(hashes)))
}

// values intersects every constraint on dim (verb or resource type) that
// holds whatever attributes are absent, as value hashes: ok is false when
// there is none.
func (e *extraction) values(dim uint8) (hashes []uint64, ok bool) {
	return intersect(e.cons, dim, func(c constraint) []uint64 { return c.hashes })
}

// intersect is values over what of(c) gives of each constraint (`like`
// keys aside: they fix no value).
func intersect[T comparable](cons []constraint, dim uint8, of func(constraint) []T) (vals []T, ok bool) {
	for _, c := range cons {
		if c.dim != dim || c.needs != 0 || c.prefix {
			continue
		}
		if !ok {
			vals, ok = slices.Clone(of(c)), true
			continue
		}
		vals = slices.DeleteFunc(vals, func(v T) bool { return !slices.Contains(of(c), v) })
	}
	return vals, ok
}
