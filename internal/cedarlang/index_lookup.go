package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

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
	// Subresource: resource.subresource, where the resource has one (never
	// open: a "*" subresource is read literally).
	Subresource QueryValue
	// UID: principal.uid, the user's UID (absent when it has none).
	UID QueryValue
	// Extra: the user's extra (principal tags).
	Extra map[string][]string
	// NamespaceLabels: the labels of the request's namespace as far as
	// they are known (NewCandidateQuery: unknown, or absent where the
	// resource has no namespaceObject).
	NamespaceLabels QueryLabels
	// SkipResidualOnly: nothing will evaluate conditions for this request
	// (no admission follows), so Lookup leaves out the permits, enforced
	// and audit-mode, that can only leave a residual (Cursor).
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
	if req.User.UID != "" {
		q.UID = known(req.User.UID)
	}
	q.describeResource(req, t)
	q.Extra = req.User.Extra
	q.NamespaceLabels = labelsOf(t.HasNamespaceObject(), q.Namespace)
	return q
}

// describeResource fills q's resource values from req, landing on t, as
// entities.Target.Attributes gives them to evaluation (Target.Open says
// which are open).
func (q *CandidateQuery) describeResource(req *entities.Request, t entities.Target) {
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
		if t.Resource.HasSubresourceAttr() {
			q.Subresource = known(req.Subresource)
		}
	default:
		q.APIGroup, q.Resource = orOpen(req.APIGroup, entities.Wildcard), orOpen(req.Resource, entities.Wildcard)
		q.Namespace, q.Name = orOpen(req.Namespace, ""), orOpen(req.Name, "")
		q.Namespace.MayBeAbsent = q.Namespace.Open && t.OptionalWhenOpen(schemagen.AttrNamespace)
		q.Name.MayBeAbsent = q.Name.Open && t.OptionalWhenOpen(schemagen.AttrName)
		if req.Subresource != "" {
			q.Subresource = known(req.Subresource)
		}
	}
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
	// labels: the namespace's labels as dLabel values ("k\x00v", "k\x01"),
	// for `like` keys on label values.
	labels []string
	rtype  types.EntityType
}

// multiStrs is the values of the set-valued dimension d that `like` keys
// may be on: the namespace's labels; none of the others (a set is never
// like a pattern).
func (s *lookupState) multiStrs(d uint8) []string {
	if d == dLabel {
		return s.labels
	}
	return nil
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

// eachBucket calls f with every bucket of the partitions parts that a
// request with verb on rtype reads: (verb, rtype), (verb, any), (any,
// rtype), (any, any); every verb's for "*".
func (ix *index) eachBucket(verb string, rtype types.EntityType, parts partitions, f func(*bucket)) {
	var verbBuf [2]uint64
	verbIDs := append(verbBuf[:0], ix.hash(verb), anyID)
	if verb == entities.Wildcard {
		verbIDs = append(slices.Clone(ix.verbs), anyID)
	}
	typeIDs := [2]uint64{ix.hash(string(rtype)), anyID}
	for part := range nPartitions {
		if parts&(1<<part) == 0 {
			continue
		}
		for _, v := range verbIDs {
			for _, t := range typeIDs {
				if b := ix.buckets[bucketKey{v, t, part}]; b != nil {
					f(b)
				}
			}
		}
	}
}

// gather lists the sorted policy lists of the partitions parts that hold
// the candidates of the request s describes (for verb): each bucket's rest,
// absent and open lists and the postings of its keys. Policies a slot holds
// inline are appended to singles. Nothing is copied: the lists are the
// index's own, and read-only.
func (ix *index) gather(s *lookupState, verb string, parts partitions, lists [][]int32, singles []int32) ([][]int32, []int32) {
	var keyBuf [64]uint64
	keys := keyBuf[:0]
	ix.eachBucket(verb, s.rtype, parts, func(b *bucket) {
		lists = appendNonEmpty(lists, b.rest)
		if m := b.absentDims & s.absentMask; m != 0 {
			for d := range nDims {
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
// partition may bring its postings); read is how many ids lists and
// singles hold.
func (ix *index) materialize(s *lookupState, lazy bool, lists [][]int32, singles []int32) (ids []int32, read int) {
	found := singles
	for _, l := range lists {
		found = append(found, l...)
	}
	if len(found) == 0 {
		return found, 0
	}
	read = len(found)
	slices.Sort(found)
	found = slices.Compact(found)
	return slices.DeleteFunc(found, func(i int32) bool { return ix.kinds[i]&kindLazy != 0 != lazy || !ix.holds(i, s) }), read
}

// collect appends to keys the slot keys of b under tag on the dimensions in
// mask, for the request's values, and to lists the policies an open value
// finds without a lookup.
func (ix *index) collect(keys []uint64, lists [][]int32, s *lookupState, b *bucket, tag uint16, mask uint16) ([]uint64, [][]int32) {
	for d := range nDims {
		if mask&(1<<d) == 0 {
			continue
		}
		switch {
		case !s.has[d]:
		case s.open[d] && s.skipOpen && isResourceDim(d):
		case s.open[d] && tag != 0:
			// A secondary key's value is open too: the policies keyed so
			// are all read (openWide), by the caller.
		case s.open[d]:
			lists = appendNonEmpty(lists, b.openRest[d])
			if b.openWideDims[d]&s.openMask != 0 {
				lists = appendNonEmpty(lists, b.openWide[d])
			}
			keys, lists = ix.collect(keys, lists, s, b, uint16(d)+1, b.openDims[d])
		case isMultiDim(d):
			if b.exact&(1<<d) != 0 {
				for _, h := range s.multi[d] {
					keys = append(keys, keyOf(b.id, tag<<4|uint16(d), h))
				}
			}
			for _, v := range s.multiStrs(d) {
				keys = ix.appendPrefixKeys(keys, v, b, tag, d)
			}
		default:
			if b.exact&(1<<d) != 0 {
				keys = append(keys, keyOf(b.id, tag<<4|uint16(d), s.vals[d]))
			}
			keys = ix.appendPrefixKeys(keys, s.strs[d], b, tag, d)
		}
	}
	return keys, lists
}

// appendPrefixKeys appends the keys under tag of a request's value v on d
// cut to each `like` prefix length keyed on d in b, to each suffix length,
// and of every window of it of each inner gram length.
func (ix *index) appendPrefixKeys(keys []uint64, v string, b *bucket, tag uint16, d uint8) []uint64 {
	td := tag<<4 | uint16(d)
	add := func(h uint64) {
		if k := keyOf(b.id, td, h); b.mayHold(k) {
			keys = append(keys, k)
		}
	}
	for _, n := range b.prefixLens[d] {
		if int(n) > len(v) {
			break
		}
		add(ix.prefixHash(v[:n]))
	}
	for _, n := range b.suffixLens[d] {
		if int(n) > len(v) {
			break
		}
		add(ix.suffixHash(v[len(v)-int(n):]))
	}
	for _, n := range b.innerLens[d] {
		for i := 0; i+int(n) <= len(v); i++ {
			add(ix.innerHash(v[i : i+int(n)]))
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
		d, kind, needs, n := uint8(h&0xff), h>>8&7, uint16(c[1]), int(h>>11)
		if kind != checkEqual {
			n *= 2 // a length before each hash
		}
		vs := c[2 : 2+n]
		c = c[2+n:]
		switch {
		case needs&s.absentMask != 0:
			// An earlier conjunct may fail: the forbid stays.
		case !s.has[d]:
			return false
		case s.open[d]:
		case kind != checkEqual:
			if !ix.affixHolds(s, d, kind, vs) {
				return false
			}
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

// affixHolds reports whether the request's value on d (one of them, on a
// set-valued dimension) has one of the `like` keys vs (length, hash pairs)
// of kind as a prefix, a suffix or a window.
func (ix *index) affixHolds(s *lookupState, d uint8, kind uint32, vs []uint32) bool {
	values := s.multiStrs(d)
	if !isMultiDim(d) {
		values = s.strs[d : d+1]
	}
	for j := 0; j < len(vs); j += 2 {
		n, h := int(vs[j]), vs[j+1]
		for _, v := range values {
			if n <= len(v) && ix.affixAt(v, n, kind, h) {
				return true
			}
		}
	}
	return false
}

// affixAt reports whether v's prefix, suffix or some window (kind) of n
// bytes hashes to h.
func (ix *index) affixAt(v string, n int, kind, h uint32) bool {
	switch kind {
	case checkPrefix:
		return uint32(ix.prefixHash(v[:n])) == h
	case checkSuffix:
		return uint32(ix.suffixHash(v[len(v)-n:])) == h
	}
	for i := 0; i+n <= len(v); i++ {
		if uint32(ix.innerHash(v[i:i+n])) == h {
			return true
		}
	}
	return false
}
