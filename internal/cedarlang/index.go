package cedarlang

import (
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// The index narrows a request to the policies that can match it, so the cost
// of a decision grows with the policies that concern the request, not with
// the size of the set. The rules (docs/performance.md, "The policy index: what it keys on"):
//
//   - From each policy's top-level conjunction (the scope, then every `when`
//     clause split at `&&`, then every `unless` clause negated: `!(a || b)` is
//     `!a && !b`, `!!a` is `a`, `!(a != b)` is `a == b`) it extracts the
//     constraints that equality, `in`, `is`, `.contains` and `.containsAny`
//     on literals fix, on these dimensions: verb (action, context.verb),
//     resource type, principal username (principal uid), group, principal
//     type, ServiceAccount namespace, ServiceAccount or Node name, resource
//     namespace, name, apiGroup and resource, and a non-resource URL's path.
//     A disjunction of constraints on one dimension is their union; several
//     constraints on one dimension all apply.
//   - `like` on a namespace, name, path or username fixes the pattern's
//     literal prefix (a key only: a request looks up its value cut to each
//     prefix length the bucket holds), or its literal suffix, or without
//     either a gram of its longest literal (a request looks up every window
//     of its value of each gram length the bucket holds). A permit's disjunction across dimensions ("in
//     team-7, or a team-7 admin"; a side may be a conjunction) is keyed
//     under each alternative. A permit's relation between two attributes
//     (`principal.namespace == resource.namespace`) carries a literal on one
//     of them to the other.
//   - A policy lands in one bucket per (verb, resource type) it allows, and in
//     each bucket under one key: the value set of its most selective
//     constraint (fewest policies share it), or "rest" without one.
//   - Enforced permits are filed apart from forbids and audit-mode policies
//     (two partitions of buckets). Lookup (cursor.go) reads the second in
//     full and the permits one at a time, merging their sorted postings in
//     place, so a decision that stops at the first satisfied permit reads
//     no more of a key's postings than it needs.
//   - Candidates looks up the request's keys, then checks every found policy
//     against all its constraints. An open request value (namespace or name
//     "", apiGroup or resource "*") satisfies every constraint on it and finds
//     every policy keyed on that dimension (but a permit constraining it can
//     leave only a residual: where no admission follows, a decision skips
//     it, CandidateQuery.SkipResidualOnly). An absent attribute (a cluster-
//     scoped resource's namespace, a User's namespace) satisfies none.
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
	// labelKeyed: some policy is keyed on (or checked against) a label of
	// the request's namespace.
	labelKeyed bool
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

// Dimensions of a constraint.
const (
	dVerb uint8 = iota
	dRType
	dUser       // principal username (the principal uid's id)
	dGroup      // a group the principal is in
	dPType      // principal type
	dPNamespace // ServiceAccount namespace
	dPName      // ServiceAccount or Node name
	dNamespace
	dName
	dAPIGroup
	dResource
	dPath // a non-resource URL's path
	// dExtra: a user-info extra (k, v) the principal has ("k\x00v", from
	// principal.getTag("k")), or an extra key it has ("k\x01", from
	// principal.hasTag("k")). Set-valued, like dGroup; always known.
	dExtra
	// dLabel: a label of the request's namespace (the labels of
	// resource.namespaceObject), as dExtra: "k\x00v" or "k\x01". Open when
	// the namespace's object is not known, absent when the request has none.
	dLabel
	nDims
	// dAlt: a disjunction of constraints on different dimensions: "alice,
	// or a member of admins", "in team-7, or a team-7 admin". A policy keyed
	// on it is filed under each alternative; it is not checked after the
	// lookup.
	dAlt = nDims
)

// resourceDims are the dimensions a request may leave open.
const resourceDims uint16 = 1<<dNamespace | 1<<dName | 1<<dAPIGroup | 1<<dResource | 1<<dPath | 1<<dLabel

// multiDims are the set-valued dimensions: a request has any number of
// values on them, and a constraint holds when one of them is among its own.
const multiDims uint16 = 1<<dGroup | 1<<dExtra | 1<<dLabel

func isMultiDim(d uint8) bool { return multiDims&(1<<d) != 0 }

// anyID is the bucket key part of an unconstrained verb or resource type. A
// value hashing to it lands in the unconstrained bucket, which every request
// reads: more candidates, never fewer.
const anyID = ^uint64(0)

// bucketKey names a bucket: a verb, a resource type, and the partition.
// Enforced permits (lazy) are kept apart from forbids and audit-mode
// policies, which a decision evaluates in full, so a request can read the
// permits one at a time (Lookup) and stop at the first satisfied one.
type bucketKey struct {
	verb, rtype uint64
	lazy        bool
}

// lazyPolicy reports whether p is in the lazy partition: an enforced permit.
func lazyPolicy(p *Policy) bool { return p.Effect != types.Forbid && !p.IsAudit() }

type dimKey struct {
	dim uint8
	val uint64
}

type bucket struct {
	id   uint32
	dims uint16 // dimensions with keyed policies
	// Policies are keyed (in the index's slots) under (tag<<4 | dim, value).
	// Tag 0 is a policy's primary key. A policy whose primary key is on a
	// resource dimension r (which requests may leave open) is also keyed
	// under tag r+1 by its most selective principal constraint, for requests
	// that leave r open; openDims[r] lists those principal dimensions,
	// openRest[r] the policies without one.
	openDims [nDims]uint16
	openRest [nDims][]int32
	// absent[d] lists the forbids keyed on a constraint that needs d, for
	// requests where d is absent or may be.
	absentDims uint16
	absent     [nDims][]int32
	// prefixLens[d]: the lengths of the `like` prefixes keyed on d (tag 0),
	// ascending: a request looks up each prefix of its value of these
	// lengths.
	prefixLens [nDims][]uint16
	// suffixLens[d]: the same for `like` suffixes (a pattern's literal
	// text after its last wildcard).
	suffixLens [nDims][]uint16
	// innerLens[d]: the lengths of the grams of `like` inner literals keyed
	// on d: a request looks up every window of its value of these lengths.
	innerLens [nDims][]uint16
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
	// prefix), rather than equals one. Used only as a key, never checked
	// after the lookup. With suffix also set, the value ends with one of
	// vals instead; with inner, it holds one of them somewhere.
	prefix, suffix, inner bool
	// hashes of vals, filled by buildIndex.
	hashes []uint64
	// alts: for dAlt, the alternatives (one per dimension).
	alts []constraint
}

// sameKind reports whether c and o key their values alike: equal values,
// `like` prefixes, suffixes or inner grams.
func (c constraint) sameKind(o constraint) bool {
	return c.prefix == o.prefix && c.suffix == o.suffix && c.inner == o.inner
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
func keyOf(bucket uint32, tagDim uint8, val uint64) uint64 {
	k := val ^ (uint64(bucket)<<8|uint64(tagDim))*0x9e3779b97f4a7c15
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
	ix.consAt, ix.needsValue = make([]uint32, len(policies)+1), make([]uint16, len(policies))
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
	ix.fill(keyed)
	return ix
}

// filePolicy files policy p (at i, extraction e) in the buckets of its
// verbs and resource types, under the keys chooseKeys picks by count, and
// notes the resource dimensions it needs.
func (ix *index) filePolicy(keyed map[uint64][]int32, verbSeen map[uint64]bool, p *Policy, e *extraction, i int32, count map[dimKey]int32) {
	vids := ix.ids(e.values(dVerb))
	tids := ix.ids(e.values(dRType))
	primary, secondary := chooseKeys(e.cons, count)
	for _, c := range e.cons {
		if c.dim != dAlt && isResourceDim(c.dim) {
			ix.needsValue[i] |= 1 << c.dim
		}
	}
	lazy := lazyPolicy(p)
	for _, v := range vids {
		if v != anyID && !verbSeen[v] {
			verbSeen[v] = true
			ix.verbs = append(ix.verbs, v)
		}
		for _, t := range tids {
			ix.bucketOf(bucketKey{v, t, lazy}).addPolicy(keyed, e.cons, i, primary, secondary)
		}
	}
}

// extractAll extracts every policy's constraints, fills their hashes, and
// counts the policies sharing each (dimension, value) other than verb and
// resource type.
func (ix *index) extractAll(policies []*Policy) ([]extraction, map[dimKey]int32) {
	exts := make([]extraction, len(policies))
	count := map[dimKey]int32{}
	for i, p := range policies {
		exts[i] = ix.extraction(p)
		for ci := range exts[i].cons {
			c := &exts[i].cons[ci]
			if c.dimMask()&(1<<dLabel) != 0 {
				ix.labelKeyed = true
			}
			if c.dim == dVerb || c.dim == dRType {
				continue
			}
			for _, part := range c.parts() {
				for _, h := range part.hashes {
					count[dimKey{part.dim, h}]++
				}
			}
		}
	}
	return exts, count
}

// chooseKeys picks a policy's keys among cons, by index (-1: none): the
// primary is the cheapest non-verb, non-type constraint (resource
// dimensions counting double, since open requests read more); the
// secondary the cheapest principal constraint that holds whenever it is
// read. A constraint's cost is how many policies share its values.
func chooseKeys(cons []constraint, count map[dimKey]int32) (primary, secondary int) {
	primary, secondary = -1, -1
	best, bestP := int64(-1), int64(-1)
	for ci, c := range cons {
		if c.dim == dVerb || c.dim == dRType {
			continue
		}
		var cost int64
		for _, part := range c.parts() {
			for _, h := range part.hashes {
				cost += int64(count[dimKey{part.dim, h}])
			}
		}
		onResource := c.dimMask()&resourceDims != 0
		if !onResource && c.needs == 0 && (bestP < 0 || cost < bestP) {
			secondary, bestP = ci, cost
		}
		if onResource {
			cost *= 2 // open requests read more
		}
		if best < 0 || cost < best {
			primary, best = ci, cost
		}
	}
	return primary, secondary
}

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
// on a resource dimension, under its secondary key for requests that leave
// that dimension open.
func (b *bucket) addPolicy(keyed map[uint64][]int32, cons []constraint, i int32, primary, secondary int) {
	if primary < 0 {
		b.rest = append(b.rest, i)
		return
	}
	c := cons[primary]
	b.dims |= c.dimMask()
	b.keyed = append(b.keyed, i)
	put(keyed, b, 0, c, i)
	for d := dUser; d < nDims; d++ {
		if c.needs&(1<<d) != 0 {
			b.absentDims |= 1 << d
			b.absent[d] = append(b.absent[d], i)
		}
	}
	for d := dNamespace; d < nDims; d++ {
		if c.dimMask()&(1<<d) == 0 || !isResourceDim(d) {
			continue
		}
		if secondary < 0 {
			b.openRest[d] = append(b.openRest[d], i)
			continue
		}
		sc := cons[secondary]
		b.openDims[d] |= sc.dimMask()
		put(keyed, b, d+1, sc, i)
	}
}

// appendChecks encodes cons (but verb, resource type and dAlt) into ix.cons,
// to be checked after the lookup.
func (ix *index) appendChecks(cons []constraint) {
	for _, c := range cons {
		if c.dim == dVerb || c.dim == dRType || c.dim == dAlt || c.prefix {
			continue
		}
		ix.cons = append(ix.cons, uint32(c.dim)|uint32(len(c.vals))<<8, uint32(c.needs))
		for _, h := range c.hashes {
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

// UnnarrowedReport is what Unnarrowed found.
type UnnarrowedReport struct {
	// Policies: every policy that nothing but its verbs and resource types
	// narrows (no principal, group, username, namespace, name, apiGroup or
	// resource value the index can use), in policy order.
	Policies []*Policy
	// Max: the most of them one request meets, for requests with Verb on
	// ResourceType ("" when that is any verb or type).
	Max                int
	Verb, ResourceType string
}

// Unnarrowed reports the policies the index cannot narrow beyond their verbs
// and resource types (those it files under "rest"): each is evaluated for
// every request of those, so many of them make decisions cost more as the
// set grows. It needs only the policies' constraints, not an index.
func Unnarrowed(policies []*Policy) UnnarrowedReport {
	var r UnnarrowedReport
	verbs, rtypes := map[string]bool{"": true}, map[string]bool{"": true}
	rest := map[[2]string]int{}
	// Each policy's verbs and types, when nothing else narrows it (in
	// parallel: extraction walks every policy).
	type found struct {
		vs, ts []string
		ok     bool
	}
	all := make([]found, len(policies))
	parallel.For(len(policies), func(i int) {
		p := policies[i]
		e := extract(p.AST, p.Effect == types.Forbid)
		if slices.ContainsFunc(e.cons, func(c constraint) bool { return c.dim != dVerb && c.dim != dRType }) {
			return
		}
		strs := func(c constraint) []string { return c.vals }
		vs, okV := intersect(e.cons, dVerb, strs)
		ts, okT := intersect(e.cons, dRType, strs)
		if okV && len(vs) == 0 || okT && len(ts) == 0 {
			return // no verb or type: never a candidate
		}
		if !okV {
			vs = []string{""}
		}
		if !okT {
			ts = []string{""}
		}
		all[i] = found{vs: slices.Compact(slices.Sorted(slices.Values(vs))), ts: slices.Compact(slices.Sorted(slices.Values(ts))), ok: true}
	})
	for i, f := range all {
		if !f.ok {
			continue
		}
		r.Policies = append(r.Policies, policies[i])
		for _, v := range f.vs {
			verbs[v] = true
			for _, t := range f.ts {
				rtypes[t] = true
				rest[[2]string{v, t}]++
			}
		}
	}
	// A request has one verb and one type: it meets the policies of (verb,
	// type), (verb, any), (any, type) and (any, any); "" stands for a verb
	// or type no such policy names.
	for v := range verbs {
		for t := range rtypes {
			n := 0
			seen := map[[2]string]bool{}
			for _, k := range [][2]string{{v, t}, {v, ""}, {"", t}, {"", ""}} {
				if !seen[k] {
					seen[k] = true
					n += rest[k]
				}
			}
			if n > r.Max || n == r.Max && (v < r.Verb || v == r.Verb && t < r.ResourceType) {
				r.Max, r.Verb, r.ResourceType = n, v, t
			}
		}
	}
	return r
}

// ScopeResourceType is the one resource type a resource scope allows
// (`resource is T`, `is T in ...`, `== T::"..."`); ok is false when the scope
// allows every type.
func ScopeResourceType(s ast.IsResourceScopeNode) (t types.EntityType, ok bool) {
	switch v := s.(type) {
	case ast.ScopeTypeIs:
		return v.Type, true
	case ast.ScopeTypeIsIn:
		return v.Type, true
	case ast.ScopeTypeEq:
		return v.Entity.Type, true
	}
	return "", false
}

// put adds policy i to keyed under b, tag and constraint c's values (each
// alternative's, for dAlt).
func put(keyed map[uint64][]int32, b *bucket, tag uint8, c constraint, i int32) {
	for _, part := range c.parts() {
		if part.prefix {
			for _, v := range part.vals {
				b.addAffixLen(part, len(v))
			}
		}
		for _, h := range slices.Compact(slices.Sorted(slices.Values(part.hashes))) {
			k := keyOf(b.id, tag<<4|part.dim, h)
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

func isResourceDim(d uint8) bool { return resourceDims&(1<<d) != 0 }

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

// intersect is values over what of(c) gives of each constraint.
func intersect[T comparable](cons []constraint, dim uint8, of func(constraint) []T) (vals []T, ok bool) {
	for _, c := range cons {
		if c.dim != dim || c.needs != 0 {
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

// CandidateQuery is what the index needs to know about a request (for one
// verb). Build it with NewCandidateQuery.
type CandidateQuery struct {
	Principal types.EntityUID // its id is the username
	Groups    []string
	// PrincipalNamespace and PrincipalName: a ServiceAccount's namespace and
	// name, a Node's name; absent (Has false) for other principals.
	PrincipalNamespace, PrincipalName QueryValue
	Verb                              string // "*" finds the policies of every verb
	ResourceType                      types.EntityType
	Namespace, Name                   QueryValue
	APIGroup, Resource                QueryValue
	Path                              QueryValue // a non-resource URL's
	// Extra: the user's extra (principal tags).
	Extra map[string][]string
	// NamespaceLabels: the labels of the request's namespace as far as
	// they are known (NewCandidateQuery: unknown, or absent where the
	// resource has no namespaceObject).
	NamespaceLabels QueryLabels
	// SkipResidualOnly: nothing will evaluate conditions for this request
	// (no admission follows), so Lookup leaves out the permits that can
	// only leave a residual (CandidateQuery.SkipResidualOnly).
	SkipResidualOnly bool
}

// QueryValue is one request attribute: a value, open (every value: "" name
// or namespace, "*" apiGroup or resource) or absent.
type QueryValue struct {
	Value string
	Has   bool // present (Value, or open)
	Open  bool
	// MayBeAbsent: open, and possibly absent too (k8s::Resource's optional
	// namespace and name).
	MayBeAbsent bool
}

func known(v string) QueryValue { return QueryValue{Value: v, Has: true} }

var openValue = QueryValue{Has: true, Open: true}

// NewCandidateQuery describes req, landing on t, for verb.
func NewCandidateQuery(req *entities.Request, t entities.Target, verb string) CandidateQuery {
	id := entities.IdentityOf(req.User.Name, req.User.Groups)
	q := CandidateQuery{Principal: id.UID, Groups: req.User.Groups, Verb: verb, ResourceType: t.EntityType}
	switch q.Principal.Type {
	case schemagen.ServiceAccountType:
		q.PrincipalNamespace, q.PrincipalName = known(id.Namespace), known(id.Name)
	case schemagen.NodeType:
		q.PrincipalName = known(id.Name)
	}
	orOpen := func(v, open string) QueryValue {
		if v == open {
			return openValue
		}
		return known(v)
	}
	switch {
	case t.EntityType == schemagen.NonResourceURLType:
		q.Path = orOpen(req.Path, "") // open: a rules review's every path
	case t.Resource != nil:
		q.APIGroup, q.Resource = known(t.Resource.Key.Group), known(t.Resource.Key.Resource)
		switch {
		case t.Resource.Namespaced:
			q.Namespace = orOpen(req.Namespace, "")
		case req.Namespace != "":
			// Cluster-scoped: the namespace a request names is present
			// (Target.Attributes), else absent.
			q.Namespace = known(req.Namespace)
		}
		q.Name = orOpen(req.Name, "")
	default:
		q.APIGroup, q.Resource = orOpen(req.APIGroup, entities.Wildcard), orOpen(req.Resource, entities.Wildcard)
		q.Namespace, q.Name = orOpen(req.Namespace, ""), orOpen(req.Name, "")
		q.Namespace.MayBeAbsent = q.Namespace.Open && t.OptionalWhenOpen(schemagen.AttrNamespace)
		q.Name.MayBeAbsent = q.Name.Open && t.OptionalWhenOpen(schemagen.AttrName)
	}
	q.Extra = req.User.Extra
	q.NamespaceLabels = labelsOf(t.HasNamespaceObject(), q.Namespace)
	return q
}

// lookupState is one request, as the index reads it: value hashes per
// dimension, open and absent dimensions.
type lookupState struct {
	vals       [nDims]uint64
	strs       [nDims]string // the values, for `like` prefixes
	has, open  [nDims]bool
	absentMask uint16 // dimensions absent, or open and possibly absent
	openMask   uint16 // dimensions open
	// skipOpen: gather leaves out what only an open value finds.
	skipOpen bool
	// multi: the value hashes of the set-valued dimensions (multiDims).
	multi [nDims][]uint64
	rtype types.EntityType
}

func (s *lookupState) set(ix *index, d uint8, v QueryValue) {
	s.has[d], s.open[d] = v.Has, v.Open
	if !v.Has || v.MayBeAbsent {
		s.absentMask |= 1 << d
	}
	if v.Has && !v.Open {
		s.vals[d], s.strs[d] = ix.hash(v.Value), v.Value
	}
}

// Candidates returns, in policy order, the policies that may match a request
// described by q: every policy whose evaluation for it can be other than
// false (or, for a permit, an error). The slice is freshly allocated. It is
// Lookup's eager policies and permits, merged.
func (ps *PolicySet) Candidates(q CandidateQuery) []*Policy {
	if ps.index == nil {
		return slices.Clone(ps.Policies)
	}
	q.SkipResidualOnly = false // every candidate
	c := ps.Lookup(q)
	defer c.Release()
	eager := c.eagerIDs
	var out []*Policy
	for i, ok := c.nextID(); ok; i, ok = c.nextID() {
		for len(eager) > 0 && eager[0] < i {
			out, eager = append(out, ps.Policies[eager[0]]), eager[1:]
		}
		out = append(out, ps.Policies[i])
	}
	for _, i := range eager {
		out = append(out, ps.Policies[i])
	}
	return out
}

// describe fills s with q's values as the index reads them.
func (ix *index) describe(s *lookupState, q CandidateQuery) {
	s.rtype = q.ResourceType
	s.set(ix, dUser, known(string(q.Principal.ID)))
	s.set(ix, dPType, known(string(q.Principal.Type)))
	s.set(ix, dPNamespace, q.PrincipalNamespace)
	s.set(ix, dPName, q.PrincipalName)
	s.set(ix, dNamespace, q.Namespace)
	s.set(ix, dName, q.Name)
	s.set(ix, dAPIGroup, q.APIGroup)
	s.set(ix, dResource, q.Resource)
	s.set(ix, dPath, q.Path)
	for d := dUser; d < nDims; d++ {
		if s.open[d] {
			s.openMask |= 1 << d
		}
	}
	s.has[dGroup] = true
	for _, g := range q.Groups {
		s.multi[dGroup] = append(s.multi[dGroup], ix.hash(g))
	}
	ix.describeTags(s, q)
}

// eachBucket calls f with every bucket of the partitions asked for
// (partitions[1]: the lazy one) that a request with verb on rtype reads:
// (verb, rtype), (verb, any), (any, rtype), (any, any); every verb's for
// "*".
func (ix *index) eachBucket(verb string, rtype types.EntityType, partitions [2]bool, f func(*bucket)) {
	var verbBuf [2]uint64
	verbIDs := append(verbBuf[:0], ix.hash(verb), anyID)
	if verb == entities.Wildcard {
		verbIDs = append(slices.Clone(ix.verbs), anyID)
	}
	typeIDs := [2]uint64{ix.hash(string(rtype)), anyID}
	for part, want := range partitions {
		if !want {
			continue
		}
		for _, v := range verbIDs {
			for _, t := range typeIDs {
				if b := ix.buckets[bucketKey{v, t, part == 1}]; b != nil {
					f(b)
				}
			}
		}
	}
}

// gather lists the sorted policy lists of the partitions asked for that
// hold the candidates of the request s describes (for verb): each bucket's
// rest, absent and open lists and the postings of its keys. Policies a slot
// holds inline are appended to singles. Nothing is copied: the lists are
// the index's own, and read-only.
func (ix *index) gather(s *lookupState, verb string, partitions [2]bool, lists [][]int32, singles []int32) ([][]int32, []int32) {
	var keyBuf [64]uint64
	keys := keyBuf[:0]
	ix.eachBucket(verb, s.rtype, partitions, func(b *bucket) {
		lists = appendNonEmpty(lists, b.rest)
		if m := b.absentDims & s.absentMask; m != 0 {
			for d := dUser; d < nDims; d++ {
				if m&(1<<d) != 0 {
					lists = appendNonEmpty(lists, b.absent[d])
				}
			}
		}
		if b.dims != 0 {
			keys, lists = ix.collect(keys, lists, s, b, 0, b.dims)
		}
	})
	return ix.lookupAll(lists, singles, keys)
}

func appendNonEmpty(lists [][]int32, l []int32) [][]int32 {
	if len(l) == 0 {
		return lists
	}
	return append(lists, l)
}

// materialize is the ids of the policies of lists and singles, once each
// and in policy order, whose constraints hold for s and which are in the
// partition asked for (a fingerprint shared with a key of the other
// partition may bring its postings).
func (ix *index) materialize(ps *PolicySet, s *lookupState, lazy bool, lists [][]int32, singles []int32) []int32 {
	found := singles
	for _, l := range lists {
		found = append(found, l...)
	}
	if len(found) == 0 {
		return found
	}
	slices.Sort(found)
	found = slices.Compact(found)
	return slices.DeleteFunc(found, func(i int32) bool { return lazyPolicy(ps.Policies[i]) != lazy || !ix.holds(i, s) })
}

// collect appends to keys the slot keys of b under tag on the dimensions in
// mask, for the request's values, and to lists the policies an open value
// finds without a lookup.
func (ix *index) collect(keys []uint64, lists [][]int32, s *lookupState, b *bucket, tag uint8, mask uint16) ([]uint64, [][]int32) {
	for d := dUser; d < nDims; d++ {
		if mask&(1<<d) == 0 {
			continue
		}
		switch {
		case !s.has[d]:
		case s.open[d] && s.skipOpen:
		case s.open[d]:
			lists = appendNonEmpty(lists, b.openRest[d])
			keys, lists = ix.collect(keys, lists, s, b, d+1, b.openDims[d])
		case isMultiDim(d):
			for _, h := range s.multi[d] {
				keys = append(keys, keyOf(b.id, tag<<4|d, h))
			}
		default:
			keys = append(keys, keyOf(b.id, tag<<4|d, s.vals[d]))
			if tag == 0 {
				keys = ix.appendPrefixKeys(keys, s, b, d)
			}
		}
	}
	return keys, lists
}

// appendPrefixKeys appends the keys of the request's value on d cut to each
// `like` prefix length keyed on d in b, to each suffix length, and of every
// window of it of each inner gram length.
func (ix *index) appendPrefixKeys(keys []uint64, s *lookupState, b *bucket, d uint8) []uint64 {
	v := s.strs[d]
	for _, n := range b.prefixLens[d] {
		if int(n) > len(v) {
			break
		}
		keys = append(keys, keyOf(b.id, d, ix.prefixHash(v[:n])))
	}
	for _, n := range b.suffixLens[d] {
		if int(n) > len(v) {
			break
		}
		keys = append(keys, keyOf(b.id, d, ix.suffixHash(v[len(v)-int(n):])))
	}
	for _, n := range b.innerLens[d] {
		for i := 0; i+int(n) <= len(v); i++ {
			keys = append(keys, keyOf(b.id, d, ix.innerHash(v[i:i+int(n)])))
		}
	}
	return keys
}

// lookupAll appends the postings of every key to lists (a policy held
// inline in its slot to singles). The keys' home slots are read in one pass
// before any is examined: the reads do not depend on each other, so their
// cache misses overlap instead of following one another.
func (ix *index) lookupAll(lists [][]int32, singles []int32, keys []uint64) ([][]int32, []int32) {
	if len(ix.slots) == 0 || len(keys) == 0 {
		return lists, singles
	}
	mask := uint64(len(ix.slots) - 1)
	var homeBuf [64]uint64
	home := homeBuf[:0]
	for _, k := range keys {
		home = append(home, ix.slots[k&mask])
	}
	for j, k := range keys {
		fp := ix.keyPrint(k)
		for i, s := k&mask, home[j]; s != 0; i, s = (i+1)&mask, ix.slots[(i+1)&mask] {
			if s>>32 != fp {
				continue
			}
			if ref := uint32(s); ref&refInline != 0 {
				singles = append(singles, int32(ref&^refInline))
			} else {
				lists = append(lists, ix.postings[ref+1:ref+1+uint32(ix.postings[ref])])
			}
		}
	}
	return lists, singles
}

// holds checks policy i's constraints against the request (by 32-bit value
// hashes: a collision keeps a policy that evaluation then rejects).
func (ix *index) holds(i int32, s *lookupState) bool {
	c := ix.cons[ix.consAt[i]:ix.consAt[i+1]]
	for len(c) > 0 {
		h := c[0]
		d, needs, n := uint8(h&0xff), uint16(c[1]), int(h>>8)
		vs := c[2 : 2+n]
		c = c[2+n:]
		switch {
		case needs&s.absentMask != 0:
			// An earlier conjunct may fail: the forbid stays.
		case !s.has[d]:
			return false
		case s.open[d]:
		case isMultiDim(d):
			if !anyAmong(s.multi[d], vs) {
				return false
			}
		case !slices.Contains(vs, uint32(s.vals[d])):
			return false
		}
	}
	return true
}

// extract lists the constraints of p's top-level conjunction that the index
// may rely on (see the rules above).
func extract(p *ast.Policy, forbid bool) extraction {
	x := &extractor{guards: map[string]bool{}, forbid: forbid}
	x.principalScope(p.Principal)
	x.actionScope(p.Action)
	if t, ok := ScopeResourceType(p.Resource); ok {
		x.add(constraint{dim: dRType, vals: []string{string(t)}})
	}
	var conj []ast.IsNode
	for _, c := range p.Conditions {
		if c.Condition == ast.ConditionUnless {
			conj = appendConjuncts(conj, negate(c.Body))
		} else {
			conj = appendConjuncts(conj, c.Body)
		}
	}
	var pending uint16 // dims of earlier forbid conjuncts that fail when absent
	for _, n := range conj {
		if _, isHas := n.(ast.NodeTypeHas); isHas {
			// A top-level `has` guards the reads after it.
			x.noteGuard(n)
			continue
		}
		cs, ok, mayFail := x.atom(n)
		x.noteGuard(n)
		x.relation(n)
		var own uint16
		if ok && mayFail && forbid {
			for _, c := range cs {
				own |= 1 << c.dim
			}
		}
		if ok {
			for _, c := range cs {
				if forbid {
					c.needs = pending | own
				}
				x.add(c)
			}
		}
		if !forbid {
			continue
		}
		pending |= own
		// A forbid relies on nothing past a conjunct that may fail for
		// another reason than an absent attribute.
		if !ok && !x.errorFree(n) {
			break
		}
	}
	if !forbid {
		x.applyRelations()
	}
	return extraction{cons: x.cons}
}

type extractor struct {
	cons   []constraint
	guards map[string]bool // "principal.namespace" after `principal has namespace`
	ptypes []string        // principal types fixed so far (nil: any)
	forbid bool
	// relations: pairs of dimensions a conjunct says are equal
	// (`principal.namespace == resource.namespace`).
	relations [][2]uint8
}

// applyRelations carries each literal constraint across the relations of a
// permit: with `principal.namespace == resource.namespace` and
// `resource.namespace == "team-7"`, the principal's namespace is "team-7"
// too. (Only for permits: a relation fails when an attribute is absent,
// which for a forbid denies.)
func (x *extractor) applyRelations() {
	for range 2 { // two rounds carry a value across two relations
		for _, r := range x.relations {
			for _, c := range x.cons {
				if c.dim == dAlt || c.prefix {
					continue
				}
				switch c.dim {
				case r[0]:
					x.add(constraint{dim: r[1], vals: c.vals})
				case r[1]:
					x.add(constraint{dim: r[0], vals: c.vals})
				}
			}
		}
	}
}

func (x *extractor) add(c constraint) {
	if c.dim == dPType {
		if x.ptypes == nil {
			x.ptypes = slices.Clone(c.vals)
		} else {
			x.ptypes = slices.DeleteFunc(x.ptypes, func(v string) bool { return !slices.Contains(c.vals, v) })
		}
	}
	x.cons = append(x.cons, c)
}

func (x *extractor) principalScope(s ast.IsPrincipalScopeNode) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		x.addAll(principalIs(v.Entity))
	case ast.ScopeTypeIn:
		x.addAll(principalIn(v.Entity))
	case ast.ScopeTypeIs:
		x.add(constraint{dim: dPType, vals: []string{string(v.Type)}})
	case ast.ScopeTypeIsIn:
		x.add(constraint{dim: dPType, vals: []string{string(v.Type)}})
		x.addAll(principalIn(v.Entity))
	}
}

func (x *extractor) addAll(cs []constraint) {
	for _, c := range cs {
		x.add(c)
	}
}

func principalIs(e types.EntityUID) []constraint {
	return []constraint{{dim: dPType, vals: []string{string(e.Type)}}, {dim: dUser, vals: []string{string(e.ID)}}}
}

// principalIn: principals' only ancestors are groups, so `principal in X`
// matches a group's members when X is a group and otherwise only X itself.
func principalIn(e types.EntityUID) []constraint {
	if e.Type == schemagen.GroupType {
		return []constraint{{dim: dGroup, vals: []string{string(e.ID)}}}
	}
	return principalIs(e)
}

func (x *extractor) actionScope(s ast.IsActionScopeNode) {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		x.add(constraint{dim: dVerb, vals: []string{actionKey(v.Entity)}})
	case ast.ScopeTypeIn:
		if vs, ok := actionIn([]types.EntityUID{v.Entity}); ok {
			x.add(constraint{dim: dVerb, vals: vs})
		}
	case ast.ScopeTypeInSet:
		if vs, ok := actionIn(v.Entities); ok {
			x.add(constraint{dim: dVerb, vals: vs})
		}
	}
}

// actionIn: `action in A` is `action == A` unless A is an action group ("*",
// any verb, or impersonate-on:<mode>:*, whose members include verbs no schema
// lists): those are not indexed.
func actionIn(es []types.EntityUID) ([]string, bool) {
	out := make([]string, 0, len(es))
	for _, e := range es {
		if e.Type == schemagen.ActionType && schemagen.IsActionGroup(string(e.ID)) {
			return nil, false
		}
		out = append(out, actionKey(e))
	}
	return out, true
}

// actionKey is the verb of a k8s::Action; other entities get a key no request
// uses, since a request's action is always a k8s::Action.
func actionKey(e types.EntityUID) string {
	if e.Type != schemagen.ActionType {
		return "\x00" + string(e.Type) + "::" + string(e.ID)
	}
	return string(e.ID)
}

// appendConjuncts splits n at top-level `&&`, left to right (the order Cedar
// evaluates them in).
func appendConjuncts(out []ast.IsNode, n ast.IsNode) []ast.IsNode {
	if a, ok := n.(ast.NodeTypeAnd); ok {
		return appendConjuncts(appendConjuncts(out, a.Left), a.Right)
	}
	return append(out, n)
}

// negate is `!n`, pushed inward where that keeps Cedar's meaning, errors
// included: `!(a || b)` is `!a && !b`, `!!a` is `a`, `!(a != b)` is `a == b`.
func negate(n ast.IsNode) ast.IsNode {
	switch v := n.(type) {
	case ast.NodeTypeNot:
		return v.Arg
	case ast.NodeTypeNotEquals:
		return ast.NodeTypeEquals(v)
	case ast.NodeTypeOr:
		return ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: negate(v.Left), Right: negate(v.Right)}}
	}
	return ast.NodeTypeNot{UnaryNode: ast.UnaryNode{Arg: n}}
}

// attr names a recognized attribute read: the dimension it fixes, and
// whether reading it may fail (the attribute may be absent).
func (x *extractor) attr(n ast.IsNode) (dim uint8, mayFail, ok bool) {
	a, isAccess := n.(ast.NodeTypeAccess)
	if !isAccess {
		return 0, false, false
	}
	v, isVar := a.Arg.(ast.NodeTypeVariable)
	if !isVar {
		return 0, false, false
	}
	guarded := x.guards[string(v.Name)+"."+string(a.Value)]
	onlyTypes := func(ts ...types.EntityType) bool {
		if x.ptypes == nil {
			return false
		}
		for _, t := range x.ptypes {
			if !slices.Contains(ts, types.EntityType(t)) {
				return false
			}
		}
		return true
	}
	switch v.Name {
	case "principal":
		switch a.Value {
		case schemagen.AttrUsername:
			return dUser, false, true
		case schemagen.AttrNamespace:
			return dPNamespace, !guarded && !onlyTypes(schemagen.ServiceAccountType), true
		case schemagen.AttrName:
			return dPName, !guarded && !onlyTypes(schemagen.ServiceAccountType, schemagen.NodeType), true
		}
	case "context":
		if a.Value == schemagen.AttrVerb {
			return dVerb, false, true
		}
	case "resource":
		switch a.Value {
		case schemagen.AttrNamespace:
			return dNamespace, !guarded, true
		case schemagen.AttrName:
			return dName, !guarded, true
		case schemagen.AttrAPIGroup:
			return dAPIGroup, !guarded, true
		case schemagen.AttrResource:
			return dResource, !guarded, true
		case schemagen.AttrPath:
			return dPath, !guarded, true
		}
	}
	return 0, false, false
}

func isVar(n ast.IsNode, name string) bool {
	v, ok := n.(ast.NodeTypeVariable)
	return ok && string(v.Name) == name
}

func literalString(n ast.IsNode) (string, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return "", false
	}
	s, ok := v.Value.(types.String)
	return string(s), ok
}

func literalEntity(n ast.IsNode) (types.EntityUID, bool) {
	v, ok := n.(ast.NodeValue)
	if !ok {
		return types.EntityUID{}, false
	}
	e, ok := v.Value.(types.EntityUID)
	return e, ok
}

// literalSet returns the elements of a set literal made of literals.
func literalSet(n ast.IsNode) ([]ast.IsNode, bool) {
	switch s := n.(type) {
	case ast.NodeTypeSet:
		for _, e := range s.Elements {
			if _, ok := e.(ast.NodeValue); !ok {
				return nil, false
			}
		}
		return s.Elements, true
	case ast.NodeValue:
		sv, ok := s.Value.(types.Set)
		if !ok {
			return nil, false
		}
		var out []ast.IsNode
		for e := range sv.All() {
			out = append(out, ast.NodeValue{Value: e})
		}
		return out, true
	}
	return nil, false
}

func literalStrings(n ast.IsNode) ([]string, bool) {
	els, ok := literalSet(n)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(els))
	for _, e := range els {
		s, ok := literalString(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// atom extracts the constraints one conjunct implies. ok is false when it
// implies none the index knows; mayFail when evaluating it may fail (only
// because a read attribute is absent).
func (x *extractor) atom(n ast.IsNode) (cs []constraint, ok, mayFail bool) {
	switch v := n.(type) {
	case ast.NodeTypeEquals:
		if cs, ok, fail := x.atomEquals(v); ok {
			return cs, ok, fail
		}
		return x.atomTagEquals(v)
	case ast.NodeTypeHasTag:
		return x.atomHasTag(v)
	case ast.NodeTypeIn:
		return atomIn(v)
	case ast.NodeTypeIs:
		switch {
		case isVar(v.Left, "principal"):
			return one(dPType, string(v.EntityType)), true, false
		case isVar(v.Left, "resource"):
			return one(dRType, string(v.EntityType)), true, false
		}
	case ast.NodeTypeIsIn:
		if e, isEnt := literalEntity(v.Entity); isEnt && isVar(v.Left, "principal") {
			return append(one(dPType, string(v.EntityType)), principalIn(e)...), true, false
		}
	case ast.NodeTypeContains:
		if cs, ok, fail := x.atomContains(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContains(v)
	case ast.NodeTypeContainsAny:
		if cs, ok, fail := atomContainsAny(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContainsAny(v)
	case ast.NodeTypeContainsAll:
		if cs, ok, fail := atomContainsAll(v); ok {
			return cs, ok, fail
		}
		return x.atomTagContainsAll(v)
	case ast.NodeTypeOr:
		return x.atomOr(v)
	case ast.NodeTypeLike:
		return x.atomLike(v)
	}
	return nil, false, false
}

// atomLike is atom for `<attr> like "prefix*..."` on a resource's
// namespace, name or a non-resource path: the value starts with the
// pattern's literal prefix (equals it, for a pattern without a wildcard).
func (x *extractor) atomLike(v ast.NodeTypeLike) (cs []constraint, ok, mayFail bool) {
	dim, fail, isAttr := x.attr(v.Arg)
	if !isAttr || dim != dNamespace && dim != dName && dim != dPath && dim != dUser {
		return nil, false, false
	}
	comps := likeComponents(v.Value)
	prefix, suffix, exact := likeAffixes(comps)
	if exact {
		return one(dim, prefix), true, fail
	}
	if prefix != "" {
		cs = append(cs, constraint{dim: dim, vals: []string{prefix}, prefix: true})
	}
	if suffix != "" {
		cs = append(cs, constraint{dim: dim, vals: []string{suffix}, prefix: true, suffix: true})
	}
	if len(cs) == 0 {
		if gram := likeInnerGram(comps); gram != "" {
			cs = append(cs, constraint{dim: dim, vals: []string{gram}, prefix: true, inner: true})
		}
	}
	// Without any, nothing to key on (but the read may fail all the same).
	return cs, len(cs) > 0, fail
}

// likeComponents is a pattern's components as cedar-go writes them in JSON:
// {"Literal": text} or "Wildcard", in order; nil when it cannot be read.
func likeComponents(p types.Pattern) []any {
	raw, err := p.MarshalJSON()
	if err != nil {
		return nil
	}
	var comps []any
	if json.Unmarshal(raw, &comps) != nil {
		return nil
	}
	return comps
}

// likeAffixes is the literal text a pattern (its likeComponents) starts
// with and the literal text after its last wildcard, and whether the
// pattern is only that text (no wildcard).
func likeAffixes(comps []any) (prefix, suffix string, exact bool) {
	if len(comps) == 0 {
		return "", "", false
	}
	suffix = likeSuffix(comps)
	first, isLiteral := comps[0].(map[string]any)
	if !isLiteral {
		return "", suffix, false // starts with a wildcard
	}
	lit, _ := first["Literal"].(string)
	return lit, suffix, len(comps) == 1
}

// innerGramMax is the most bytes of an inner literal a `like` key holds.
const innerGramMax = 4

// likeInnerGram is what a `like` pattern (its likeComponents) with neither
// a literal prefix nor a literal suffix is keyed on: the last innerGramMax
// bytes (or fewer, at least 2) of its longest literal. A matching value
// holds that literal, so it holds the gram in some window; "" when no
// literal is that long.
func likeInnerGram(comps []any) string {
	longest := ""
	for _, c := range comps {
		if lit, isLiteral := c.(map[string]any); isLiteral {
			if s, _ := lit["Literal"].(string); len(s) > len(longest) {
				longest = s
			}
		}
	}
	if len(longest) < 2 {
		return ""
	}
	return longest[len(longest)-min(len(longest), innerGramMax):]
}

// one is a single constraint: dim takes one of vals.
func one(dim uint8, vals ...string) []constraint { return []constraint{{dim: dim, vals: vals}} }

// atomEquals is atom for `a == b`: a scope variable equal to an entity
// literal, or a recognized attribute equal to a string literal (either side).
func (x *extractor) atomEquals(v ast.NodeTypeEquals) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		field, lit := lr[0], lr[1]
		if e, isEnt := literalEntity(lit); isEnt {
			switch {
			case isVar(field, "principal"):
				return principalIs(e), true, false
			case isVar(field, "action"):
				return one(dVerb, actionKey(e)), true, false
			case isVar(field, "resource"):
				return one(dRType, string(e.Type)), true, false
			}
			continue
		}
		s, isStr := literalString(lit)
		if !isStr {
			continue
		}
		if dim, fail, isAttr := x.attr(field); isAttr {
			return one(dim, s), true, fail
		}
	}
	return nil, false, false
}

// relation records a top-level conjunct `a == b` between two recognized
// attributes (other than the verb) as a relation.
func (x *extractor) relation(n ast.IsNode) {
	eq, isEq := n.(ast.NodeTypeEquals)
	if !isEq {
		return
	}
	da, _, okA := x.attr(eq.Left)
	db, _, okB := x.attr(eq.Right)
	if okA && okB && da != db && da != dVerb && db != dVerb {
		x.relations = append(x.relations, [2]uint8{da, db})
	}
}

// atomIn is atom for `principal in ...` and `action in ...` on an entity
// literal or a set literal of them.
func atomIn(v ast.NodeTypeIn) (cs []constraint, ok, mayFail bool) {
	if e, isEnt := literalEntity(v.Right); isEnt {
		switch {
		case isVar(v.Left, "principal"):
			return principalIn(e), true, false
		case isVar(v.Left, "action"):
			if vs, ok := actionIn([]types.EntityUID{e}); ok {
				return one(dVerb, vs...), true, false
			}
		}
		return nil, false, false
	}
	if isVar(v.Left, "principal") {
		if els, isSet := literalSet(v.Right); isSet {
			return principalInSet(els)
		}
		return nil, false, false
	}
	if isVar(v.Left, "action") {
		return actionInSet(v.Right)
	}
	return nil, false, false
}

// actionInSet is atom for `action in [...]`: extracted when every element
// is an entity literal and none is the any-verb action.
func actionInSet(set ast.IsNode) (cs []constraint, ok, mayFail bool) {
	els, isSet := literalSet(set)
	if !isSet {
		return nil, false, false
	}
	es := make([]types.EntityUID, 0, len(els))
	for _, el := range els {
		e, isEnt := literalEntity(el)
		if !isEnt {
			return nil, false, false
		}
		es = append(es, e)
	}
	if vs, ok := actionIn(es); ok {
		return one(dVerb, vs...), true, false
	}
	return nil, false, false
}

// atomContains is atom for ["a","b"].contains(<attr>) and
// principal.groups.contains("g").
func (x *extractor) atomContains(v ast.NodeTypeContains) (cs []constraint, ok, mayFail bool) {
	if vals, isSet := literalStrings(v.Left); isSet {
		if dim, fail, isAttr := x.attr(v.Right); isAttr {
			return one(dim, vals...), true, fail
		}
	}
	if isGroups(v.Left) {
		if s, isStr := literalString(v.Right); isStr {
			return one(dGroup, s), true, false
		}
	}
	return nil, false, false
}

// atomContainsAny is atom for principal.groups.containsAny([...]) and
// [...].containsAny(principal.groups).
func atomContainsAny(v ast.NodeTypeContainsAny) (cs []constraint, ok, mayFail bool) {
	for _, lr := range [2][2]ast.IsNode{{v.Left, v.Right}, {v.Right, v.Left}} {
		if isGroups(lr[0]) {
			if vals, isSet := literalStrings(lr[1]); isSet {
				return one(dGroup, vals...), true, false
			}
		}
	}
	return nil, false, false
}

// atomContainsAll is atom for principal.groups.containsAll([...]): each
// group is needed, so each is a constraint of its own.
func atomContainsAll(v ast.NodeTypeContainsAll) (cs []constraint, ok, mayFail bool) {
	if !isGroups(v.Left) {
		return nil, false, false
	}
	vals, isSet := literalStrings(v.Right)
	if !isSet || len(vals) == 0 {
		return nil, false, false
	}
	cs = make([]constraint, len(vals))
	for i, g := range vals {
		cs[i] = constraint{dim: dGroup, vals: []string{g}}
	}
	return cs, true, false
}

// atomOr is atom for `a || b`: the union of constraints on one dimension, or
// a dAlt across username and group (one alternative per dimension).
func (x *extractor) atomOr(v ast.NodeTypeOr) (cs []constraint, ok, mayFail bool) {
	l, lok, lfail := x.side(v.Left)
	r, rok, rfail := x.side(v.Right)
	if !lok || !rok {
		return nil, false, false
	}
	if len(l) == 1 && len(r) == 1 && l[0].dim == r[0].dim && l[0].dim != dAlt && l[0].sameKind(r[0]) {
		return []constraint{{dim: l[0].dim, prefix: l[0].prefix, suffix: l[0].suffix, inner: l[0].inner, vals: append(slices.Clone(l[0].vals), r[0].vals...)}}, true, lfail || rfail
	}
	la, lalt := alternative(l)
	ra, ralt := alternative(r)
	// A side that may fail (an absent attribute) fails the disjunction,
	// which for a permit is not matching; a forbid would deny.
	if (lfail || rfail) && x.forbid || !lalt || !ralt {
		return nil, false, false
	}
	alts := mergeAlternatives(append(la, ra...))
	if len(alts) == 1 {
		return alts, true, lfail || rfail
	}
	return []constraint{{dim: dAlt, alts: alts}}, true, lfail || rfail
}

// side is atom for one side of a disjunction. A permit's side may also be a
// conjunction: whenever it holds, each of its conjuncts' constraints does.
// (A forbid's may not: a conjunct it cannot read may fail, and deny.)
func (x *extractor) side(n ast.IsNode) (cs []constraint, ok, mayFail bool) {
	and, isAnd := n.(ast.NodeTypeAnd)
	if !isAnd || x.forbid {
		return x.atom(n)
	}
	for _, c := range appendConjuncts(nil, and) {
		ccs, cok, cfail := x.atom(c)
		if cok {
			cs, ok, mayFail = append(cs, ccs...), true, mayFail || cfail
		}
	}
	return cs, ok, mayFail
}

// mergeAlternatives unites the alternatives on each dimension, in the order
// their dimensions first appear.
func mergeAlternatives(as []constraint) []constraint {
	var alts []constraint
	for _, a := range as {
		if i := slices.IndexFunc(alts, func(b constraint) bool { return b.dim == a.dim && b.sameKind(a) }); i >= 0 {
			alts[i].vals = append(slices.Clone(alts[i].vals), a.vals...)
		} else {
			alts = append(alts, constraint{dim: a.dim, vals: a.vals, prefix: a.prefix, suffix: a.suffix, inner: a.inner})
		}
	}
	return alts
}

// principalInSet: `principal in [...]` is in one of them; extracted when
// they are all groups, or all entities of one other type (which a principal
// is in only by being one).
func principalInSet(els []ast.IsNode) (cs []constraint, ok, mayFail bool) {
	var groups, ids []string
	var typ types.EntityType
	for _, el := range els {
		e, isEnt := literalEntity(el)
		switch {
		case !isEnt:
			return nil, false, false
		case e.Type == schemagen.GroupType:
			groups = append(groups, string(e.ID))
		case typ != "" && e.Type != typ:
			return nil, false, false
		default:
			typ = e.Type
			ids = append(ids, string(e.ID))
		}
	}
	switch {
	case len(groups) > 0 && len(ids) == 0:
		return []constraint{{dim: dGroup, vals: groups}}, true, false
	case len(ids) > 0 && len(groups) == 0:
		return []constraint{{dim: dPType, vals: []string{string(typ)}}, {dim: dUser, vals: ids}}, true, false
	}
	return nil, false, false
}

// alternative is what one side of a disjunction implies on a dimension a
// policy can be keyed on: a dAlt's alternatives, or one such constraint of
// the side (each of a side's constraints holds when it does).
func alternative(cs []constraint) ([]constraint, bool) {
	for _, c := range cs {
		switch c.dim {
		case dAlt:
			return c.alts, true
		case dVerb, dRType, dPType:
		default:
			return []constraint{c}, true
		}
	}
	return nil, false
}

func isGroups(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	return ok && isVar(a.Arg, "principal") && a.Value == schemagen.AttrGroups
}

// errorFree reports whether evaluating n certainly cannot fail (conservative:
// false when unsure). Only boolean-valued forms over always-present inputs.
func (x *extractor) errorFree(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeValue:
		_, ok := v.Value.(types.Boolean)
		return ok
	case ast.NodeTypeHas:
		return isVar(v.Arg, "principal") || isVar(v.Arg, "resource")
	case ast.NodeTypeIs:
		return isVar(v.Left, "principal") || isVar(v.Left, "resource")
	case ast.NodeTypeNot:
		return x.errorFree(v.Arg)
	case ast.NodeTypeAnd:
		return x.errorFree(v.Left) && x.errorFree(v.Right)
	case ast.NodeTypeOr:
		return x.errorFree(v.Left) && x.errorFree(v.Right)
	case ast.NodeTypeEquals:
		return x.valueErrorFree(v.Left) && x.valueErrorFree(v.Right)
	case ast.NodeTypeNotEquals:
		return x.valueErrorFree(v.Left) && x.valueErrorFree(v.Right)
	default:
		// Recognized atoms that cannot fail: in, is, contains on literals.
		_, ok, fail := x.atom(n)
		return ok && !fail
	}
}

// valueErrorFree: reading n cannot fail (literals, variables, attributes
// that are always present).
func (x *extractor) valueErrorFree(n ast.IsNode) bool {
	switch n.(type) {
	case ast.NodeValue, ast.NodeTypeVariable:
		return true
	}
	if isGroups(n) {
		return true
	}
	_, fail, ok := x.attr(n)
	return ok && !fail
}
